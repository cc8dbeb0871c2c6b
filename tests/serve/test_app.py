"""The app in-process (starlette's TestClient): answers equal `embed`'s, every format and
layer choice, every refusal, the pipeline endpoints, and nobody harmed by anybody else."""

import io
import json
import threading
import time

import numpy as np
import pytest
import spacy
import torch

from spacy_elmo.bilm.embedder import mix_layers
from spacy_elmo.checksums import tensors_sha256
from spacy_elmo.serve import answers
from spacy_elmo.serve.limits import Batching, Limits
from spacy_elmo.serve.served import open_served

from .conftest import OPTIONS, WEIGHTS, client, split_lengths
from .conftest import test_client_class as client_class

ATOL = 1e-6


def max_diff(a, b):
    a, b = np.asarray(a, dtype="float32"), np.asarray(b, dtype="float32")
    assert a.shape == b.shape
    return float(np.abs(a - b).max()) if a.size else 0.0


def assert_close(got, expected):
    """Equal to float32 rounding: other batches, and the word cache's history (vectors of
    words first seen in other batches), change the rounding of the matmuls (one row runs
    another kernel than several): up to 1.1e-6 on the fixture, whose values reach 4.6."""
    np.testing.assert_allclose(np.asarray(got, dtype="float32"), expected, rtol=1e-6,
                               atol=ATOL)


def test_a_first_request_alone_gets_exactly_what_embed_gives(embedded):
    """The same code path as `embed`: bitwise equal when the batch and the word cache's
    history are the same (a new server, one sentence)."""
    with client(open_served(str(WEIGHTS), options=str(OPTIONS))) as c:
        got = embed(c, {"sentences": [embedded["sentences"][3]]}).json()["embeddings"][0]
    assert max_diff(got, embedded["all"][3]) == 0.0


def embed(c, payload, **headers):
    response = c.post("/v1/embed", json=payload, headers=headers)
    assert response.status_code == 200, response.text
    return response


def test_every_layer_choice_equals_embed(served_bilm, embedded):
    sentences, alone = embedded["sentences"][:6], embedded["all"][:6]
    with client(served_bilm) as c:
        got = {layers: embed(c, {"sentences": sentences, "layers": layers}).json()
               for layers in ("all", "top", "average")}
        weights = [0.2, 0.3, 0.5]
        mixed = embed(c, {"sentences": sentences, "layers": "mix", "mix_weights": weights,
                          "gamma": 2.0}).json()
    for i, expected in enumerate(alone):
        assert_close(got["all"]["embeddings"][i], expected)
        assert_close(got["top"]["embeddings"][i], expected[-1])
        assert_close(got["average"]["embeddings"][i], torch.from_numpy(expected).mean(0))
        manual = 2.0 * sum(w * layer for w, layer in zip(weights, expected, strict=True))
        assert_close(mixed["embeddings"][i], manual)
    assert got["top"]["width"] == 32 and got["top"]["layers"] == "top"


def test_binary_answers_hold_the_json_values(served_bilm, embedded):
    sentences = [embedded["sentences"][0], [], embedded["sentences"][1]]
    with client(served_bilm) as c:
        as_json = embed(c, {"sentences": sentences}).json()["embeddings"]
        npy = embed(c, {"sentences": sentences}, Accept=answers.NPY)
        raw = embed(c, {"sentences": sentences, "layers": "top"}, Accept=answers.RAW)
        top = embed(c, {"sentences": sentences, "layers": "top"}).json()["embeddings"]
    assert npy.headers["content-type"] == answers.NPY
    array = np.load(io.BytesIO(npy.content), allow_pickle=False)
    assert array.dtype == np.float32 and npy.headers["X-Elmo-Shape"] == ",".join(
        map(str, array.shape))
    parts = split_lengths(array, npy.headers["X-Elmo-Lengths"])
    assert [p.shape[1] for p in parts] == [len(s) for s in sentences]
    for part, expected in zip(parts, as_json, strict=True):  # (JSON has no shape for [])
        assert np.array_equal(part, np.asarray(expected, dtype="float32").reshape(part.shape))
    flat = np.frombuffer(raw.content, dtype="<f4").reshape(
        [int(n) for n in raw.headers["X-Elmo-Shape"].split(",")])
    for part, expected in zip(split_lengths(flat, raw.headers["X-Elmo-Lengths"]), top,
                              strict=True):
        assert np.array_equal(part, np.asarray(expected, dtype="float32").reshape(part.shape))


def test_texts_are_tokenized_by_spacy_and_embedded_as_their_tokens(served_bilm):
    texts = ["Hello, world!  Don't panic.", "Grüße aus Köln 🙂", "   "]
    expected_tokens = [[t.text for t in spacy.blank("en")(text) if not t.is_space]
                       for text in texts]
    with client(served_bilm) as c:
        answer = embed(c, {"texts": texts, "layers": "top"}).json()
        as_tokens = embed(c, {"sentences": expected_tokens, "layers": "top"}).json()
        german = embed(c, {"texts": ["Das ist's."], "lang": "de"}).json()
        unknown = c.post("/v1/embed", json={"texts": ["x"], "lang": "qq"})
    assert answer["tokens"] == expected_tokens
    for got, want in zip(answer["embeddings"], as_tokens["embeddings"], strict=True):
        assert_close(got, np.asarray(want, dtype="float32").reshape(np.shape(got)))
    assert german["tokens"] == [[t.text for t in spacy.blank("de")("Das ist's.")]]
    assert unknown.status_code == 422 and unknown.json()["error"]["code"] == "E210"


def until(condition) -> None:
    """Wait (up to a minute) until condition() holds: the requests have reached the batcher."""
    deadline = time.monotonic() + 60
    while not condition():
        assert time.monotonic() < deadline, "the requests did not reach the batcher"
        threading.Event().wait(0.01)


def test_requests_batched_together_get_what_each_gets_alone(served_bilm, embedded):
    """The worker is held on the first request until every other one waits, so the others
    run as one batch."""
    sentences, alone = embedded["sentences"], embedded["all"]
    with client(served_bilm, batching=Batching(max_wait_ms=0)) as c:
        batcher = c.app_state.batcher
        gate, run = threading.Event(), batcher._run
        taken = []

        def held(kind, payloads):
            taken.extend(payloads)
            gate.wait(30)
            return run(kind, payloads)

        batcher._run = held
        results = [None] * len(sentences)

        def ask(i):
            results[i] = embed(c, {"sentences": [sentences[i]]}).json()["embeddings"][0]

        threads = [threading.Thread(target=ask, args=(i,)) for i in range(len(sentences))]
        threads[0].start()
        until(lambda: len(taken) == 1)  # the first request is held in the worker
        for t in threads[1:]:
            t.start()
        until(lambda: batcher._queue.qsize() >= len(sentences) - 1)
        gate.set()
        for t in threads:
            t.join(30)
        stats = c.get("/v1/info").json()["stats"]
    assert stats["batches"] == 2 and stats["largest_batch"] == len(sentences) - 1
    for got, expected in zip(results, alone, strict=True):
        assert_close(got, expected)


BAD = [  # (body, headers, status, code, words in the message)
    (b"", {}, 400, "E205", "empty"),
    (b"\xff\xfe{}", {}, 400, "E204", "byte 0"),
    (b'{"sentences": [["a"]]', {}, 400, "E205", "line 1"),
    (b'{"sentences": [["a"]], "gamma": NaN}', {}, 400, "E205", "NaN"),
    (b'["a"]', {}, 422, "E206", "the body"),
    (b'{"sentences": [[1]]}', {}, 422, "E206", "sentences[0][0]"),
    (b'{"sentences": [["a"]], "file": "/etc/passwd"}', {}, 422, "E206", "file: Extra"),
    (b"{}", {}, 422, "E207", "neither"),
    (b'{"sentences": [["a b"]]}', {}, 422, "E208", "whitespace"),
    (b'{"sentences": [["\\ud83d"]]}', {}, 422, "E208", "lone surrogate U+D83D"),
    (b'{"texts": ["a\\u0000b"]}', {}, 422, "E208", "NUL"),
    (b'{"sentences": [["a"]], "layers": "mix", "mix_weights": [1]}', {}, 422, "E211", "3"),
    (b'{"sentences": [["a"]]}', {"Accept": "text/html"}, 406, "E212", "text/html"),
    (b'{"texts": ["a b"]}', {"Accept": "application/x-npy"}, 406, "E283", "tokens"),
    (b'{"texts": ["a b"]}', {"Accept": "application/octet-stream"}, 406, "E283", "`sentences`"),
    (b'{"sentences": [["a"]]}', {"Content-Type": "text/plain"}, 415, "E213", "text/plain"),
    (b'{"sentences": [["a"], ["b"], ["c"]]}', {}, 413, "E202", "limit of 2"),
    (b'{"sentences": [["a", "b", "c", "d", "e", "f"]]}', {}, 413, "E203", "limit of 5"),
    (b'{"texts": ["a b c d e f"]}', {}, 413, "E203", "limit of 5"),
    (b'{"texts": ["a-b-c-d-e-f"]}', {}, 413, "E203", "11 tokens"),  # counted once tokenized
    (b'{"sentences": [["' + b"x" * 300 + b'"]]}', {}, 413, "E201", "limit of 200 bytes"),
]


def test_every_bad_request_gets_its_error_and_harms_nobody(served_bilm, embedded):
    limits = Limits(max_request_bytes=200, max_sentences=2, max_tokens=5)
    sentence = embedded["sentences"][3][:5]
    with client(served_bilm, limits=limits) as c:
        before = embed(c, {"sentences": [sentence]}).json()["embeddings"]
        for raw, headers, status, code, words in BAD:
            response = c.post("/v1/embed", content=raw,
                              headers={"Content-Type": "application/json", **headers})
            error = response.json()["error"]
            assert (response.status_code, error["code"], error["status"]) == (
                status, code, status), raw
            assert error["message"].startswith(f"[{code}] ") and words in error["message"], \
                error["message"]
        after = embed(c, {"sentences": [sentence]}).json()["embeddings"]
        assert c.get("/healthz").json() == {"status": "ok"}
    assert after == before


def test_unknown_endpoints_and_methods(served_bilm):
    with client(served_bilm) as c:
        missing, wrong = c.get("/v2/embed"), c.get("/v1/embed")
        parse = c.post("/v1/parse", json={"texts": ["x"]})
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "E215"
    assert "POST /v1/embed" in missing.json()["error"]["message"]
    assert wrong.status_code == 405 and wrong.json()["error"]["code"] == "E215"
    assert wrong.headers["Allow"] == "POST"
    assert parse.status_code == 404 and parse.json()["error"]["code"] == "E214"


def test_info_health_and_openapi(served_bilm):
    with client(served_bilm) as c:
        info = c.get("/v1/info").json()
        health = c.get("/healthz")
        schema = c.get("/openapi.json").json()
        docs = c.get("/docs")
    assert info["model"] == {"kind": "bilm", "source": str(WEIGHTS), "lang": "en"}
    assert info["shape"]["layers"] == 3 and info["shape"]["width"] == 32
    assert info["precision"] == "fp32"
    assert info["checksum"] == "sha256:" + tensors_sha256(served_bilm.bilm.state_dict())
    assert info["settings"]["limits"]["max_tokens"] == Limits().max_tokens
    assert set(info["endpoints"]) == {"POST /v1/embed", "GET /healthz", "GET /v1/info",
                                      "GET /metrics"}
    assert health.status_code == 200 and health.json() == {"status": "ok"}
    body = schema["paths"]["/v1/embed"]["post"]["requestBody"]["content"]["application/json"]
    assert set(body["schema"]["properties"]) >= {"sentences", "texts", "layers", "mix_weights"}
    assert docs.status_code == 200


def test_a_stopping_server_refuses_and_says_so(served_bilm):
    with client(served_bilm) as c:
        c.app_state.batcher.begin_stop(0.0)
        response = c.post("/v1/embed", json={"sentences": [["a"]]})
        health = c.get("/healthz")
    assert response.status_code == 503 and response.json()["error"]["code"] == "E216"
    assert response.headers["Retry-After"] == "1"
    assert health.status_code == 503 and health.json() == {"status": "stopping"}
    # during a stop every answer asks the client to close: its next request goes elsewhere
    assert response.headers["Connection"] == health.headers["Connection"] == "close"


def test_a_batch_never_holds_more_real_tokens_than_its_limit(served_bilm):
    """Texts whose whitespace words are few but whose tokens are many ("!?" * 250: one word,
    500 tokens, three windows of 250, 300 and 150 tokens) are measured once tokenized: four
    of them waiting together run in batches of at most --max-batch-tokens tokens, each
    window counted with its <S> and </S>, and each answer is what embed gives alone."""
    limit = 1100
    counted = []
    run_pieces = served_bilm.embedder.run_pieces

    def counting(pieces):
        counted.append(sum(len(p.words) + 2 for p in pieces))
        return run_pieces(pieces)

    body = {"texts": ["!?" * 250], "lang": "en"}
    with client(served_bilm, limits=Limits(max_tokens=600, max_sentences=8),
                batching=Batching(max_wait_ms=300, max_batch_tokens=limit)) as c:
        served_bilm.embedder.run_pieces = counting
        try:
            results = [None] * 4

            def ask(i):
                results[i] = embed(c, body)

            threads = [threading.Thread(target=ask, args=(i,)) for i in range(4)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(60)
            stats = c.get("/v1/info").json()["stats"]
        finally:
            del served_bilm.embedder.run_pieces
    assert [r.status_code for r in results] == [200] * 4
    tokens = results[0].json()["tokens"][0]
    assert len(tokens) == 500
    assert sum(counted) == 4 * (252 + 302 + 152) and max(counted) <= limit, counted
    assert stats["largest_batch_tokens"] == max(counted) and stats["requests"] == 4
    alone = next(iter(served_bilm.embedder.embed([tokens])))
    for result in results:
        assert_close(result.json()["embeddings"][0], alone)


def test_a_long_request_shares_the_model_with_short_ones(served_bilm, embedded):
    """A request of 64 sentences of 250 tokens runs in steps of about --step-tokens: a short
    request sent while it runs is answered long before it, and both answers are embed's."""
    long_body = {"sentences": [["word"] * 250] * 64, "layers": "top"}
    order = []
    with client(served_bilm, limits=Limits(max_tokens=20000, max_sentences=64),
                batching=Batching(max_batch_tokens=20000, step_tokens=512)) as c:
        batcher = c.app_state.batcher

        def ask_long():
            order.append(("long", embed(c, long_body).json()["embeddings"]))

        thread = threading.Thread(target=ask_long)
        thread.start()
        until(lambda: batcher.stats["batches"] >= 2)  # the long request is under way
        short = embed(c, {"sentences": [embedded["sentences"][3]]}).json()["embeddings"][0]
        order.append(("short", short))
        answered_at = batcher.stats["batches"]
        thread.join(120)
        batches = batcher.stats["batches"]
    assert [name for name, _ in order] == ["short", "long"]
    assert batches - answered_at >= 10  # the long one ran on for many steps after it
    assert_close(short, embedded["all"][3])
    alone = next(iter(top_layer_embedder(served_bilm).embed([["word"] * 250])))
    for got in order[1][1]:
        assert_close(got, alone)


def top_layer_embedder(served):
    from spacy_elmo.bilm.embedder import Embedder

    return Embedder(served.bilm, layers="top", window=served.embedder.window)


def metric(text: str, name: str) -> float:
    """The value of one sample (`name` with its labels, as the text format writes it)."""
    values = [float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
              if line.startswith(name + " ")]
    assert len(values) == 1, (name, [line for line in text.splitlines() if name in line])
    return values[0]


def test_metrics_count_requests_refusals_batches_and_tokens(served_bilm):
    pytest.importorskip("prometheus_client")
    with client(served_bilm, batching=Batching(max_wait_ms=0)) as c:
        for _ in range(3):
            assert embed(c, {"sentences": [["a", "b"], ["c"]]}).status_code == 200
        assert c.post("/v1/embed", json={"sentences": [["a b"]]}).status_code == 422
        assert c.post("/v1/embed", content=b"[", headers={"Content-Type": "application/json"}
                      ).status_code == 400
        response = c.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    text = response.text
    assert metric(text, 'elmo_requests_total{route="/v1/embed",status="200"}') == 3
    assert metric(text, 'elmo_requests_total{route="/v1/embed",status="422"}') == 1
    assert metric(text, 'elmo_refusals_total{code="E208"}') == 1
    assert metric(text, 'elmo_refusals_total{code="E205"}') == 1
    assert metric(text, 'elmo_request_seconds_count{route="/v1/embed"}') == 5
    assert metric(text, "elmo_batch_requests_count") == 3
    assert metric(text, "elmo_batch_sentences_sum") == 6
    assert metric(text, "elmo_tokens_total") == 3 * (4 + 3)  # tokens with <S> and </S>
    assert metric(text, "elmo_batch_tokens_sum") == 21
    assert metric(text, "elmo_queue_depth") == 0
    assert metric(text, "elmo_answers_in_flight") == 0
    assert metric(text, 'elmo_connection_events_total{event="refused"}') == 0


def test_a_server_whose_model_thread_ended_says_failed(served_bilm, monkeypatch):
    from spacy_elmo.serve import app as app_module

    def broken(threads):
        def setup():
            raise RuntimeError("no threads for the model")
        return setup

    monkeypatch.setattr(app_module, "_threads_setter", broken)
    TestClient = client_class()
    app = app_module.make_app(served_bilm, threads=1)
    with TestClient(app, raise_server_exceptions=False) as c:
        until(lambda: not app.state.elmo.batcher.alive)
        response = c.post("/v1/embed", json={"sentences": [["a"]]})
        health = c.get("/healthz")
    assert response.status_code == 503 and response.json()["error"]["code"] == "E275"
    assert "no threads for the model" in response.json()["error"]["message"]
    assert health.status_code == 503 and health.json() == {"status": "failed"}


def test_mix_weights_of_any_size_and_a_gamma_too_large_for_float32(served_bilm, embedded):
    """Weights are normalised in float64 (huge or tiny ones mix as their ratios say); a
    gamma that overflows the vectors is refused (E270) in JSON and binary alike, and the
    other requests of its batch are answered."""
    sentence = embedded["sentences"][0]
    layers = embedded["all"][0]
    mix = {"sentences": [sentence], "layers": "mix"}
    with client(served_bilm) as c:
        huge = embed(c, {**mix, "mix_weights": [1, 1, 1e308]})
        overflowing = embed(c, {**mix, "mix_weights": [1e308, 1e308, 1]})  # sum: inf
        tiny = embed(c, {**mix, "mix_weights": [1e-46, 0, 0]})
        over = c.post("/v1/embed", json={**mix, "gamma": 1e38})
        over_npy = c.post("/v1/embed", json={**mix, "gamma": 1e38},
                          headers={"Accept": answers.NPY})
        after = embed(c, {**mix, "gamma": 2.0})
    assert huge.status_code == tiny.status_code == 200
    assert_close(huge.json()["embeddings"][0], layers[2])
    assert_close(tiny.json()["embeddings"][0], layers[0])
    assert_close(overflowing.json()["embeddings"][0], layers[:2].mean(0))
    for response in (over, over_npy):
        assert response.status_code == 422 and response.json()["error"]["code"] == "E270"
    assert_close(after.json()["embeddings"][0], 2.0 * layers.mean(0))


def test_json_answers_have_a_size_limit_binary_ones_do_not(served_bilm, embedded):
    sentence = embedded["sentences"][0]
    width = served_bilm.width
    limit = len(sentence) * width  # one layer of the sentence fits, all three do not
    with client(served_bilm, limits=Limits(max_json_values=limit)) as c:
        top = embed(c, {"sentences": [sentence], "layers": "top"})
        every = c.post("/v1/embed", json={"sentences": [sentence]})
        text = c.post("/v1/embed", json={"texts": [" ".join(sentence)]})
        binary = embed(c, {"sentences": [sentence]}, Accept=answers.NPY)
        info = c.get("/v1/info").json()
    assert top.status_code == 200 and binary.status_code == 200
    for response in (every, text):  # refused before the model runs, or once texts are split
        error = response.json()["error"]
        assert response.status_code == 413 and error["code"] == "E271"
        assert f"{3 * limit:,} numbers" in error["message"]
    assert info["settings"]["limits"]["max_json_values"] == limit


def test_a_model_failure_fails_that_request_only(served_bilm, embedded):
    """A request the model fails on gets a 500 (E217); the others of its batch are
    answered (run again alone)."""
    sentences = embedded["sentences"][:3]
    with client(served_bilm, batching=Batching(max_wait_ms=0)) as c:
        batcher = c.app_state.batcher
        gate, run = threading.Event(), batcher._run

        taken = []  # the jobs of the batch held at the gate

        def failing(kind, payloads):
            taken.extend(payloads)
            gate.wait(30)
            if any(job.sentences == [["BOOM"]] for job in payloads):
                raise RuntimeError("the model broke")
            return run(kind, payloads)

        batcher._run = failing
        results = {}

        def ask(name, payload):
            results[name] = c.post("/v1/embed", json=payload)

        threads = [threading.Thread(target=ask, args=(i, {"sentences": [s]}))
                   for i, s in enumerate(sentences)]
        threads.append(threading.Thread(target=ask, args=("boom", {"sentences": [["BOOM"]]})))
        for t in threads:
            t.start()
        until(lambda: len(taken) + batcher._queue.qsize() >= len(threads))  # held or waiting
        gate.set()
        for t in threads:
            t.join(30)
    assert results["boom"].status_code == 500
    assert results["boom"].json()["error"]["code"] == "E217"
    assert "the model broke" in results["boom"].json()["error"]["message"]
    for i, expected in enumerate(embedded["all"][:3]):
        assert_close(results[i].json()["embeddings"][0], expected)


def test_a_pipeline_parses_and_embeds(pipeline_dir):
    served = open_served(str(pipeline_dir))
    nlp = spacy.load(pipeline_dir)
    texts = ["Alice flew to Paris. She liked it.", "Bob  stayed."]
    with client(served) as c:
        parsed = c.post("/v1/parse", json={"texts": texts, "elmo": True})
        plain = c.post("/v1/parse", json={"texts": texts}).json()
        mixed = embed(c, {"texts": texts, "layers": "mix"}).json()
        own = embed(c, {"texts": texts, "layers": "mix", "mix_weights": [1, 1, 1]}).json()
        layers = embed(c, {"texts": texts}).json()
        other_lang = c.post("/v1/embed", json={"texts": ["x"], "lang": "de"})
        info = c.get("/v1/info").json()
    assert parsed.status_code == 200, parsed.text
    docs = parsed.json()["docs"]
    for text, item, plain_item in zip(texts, docs, plain["docs"], strict=True):
        doc = nlp(text)
        assert item["doc"] == doc.to_json() == plain_item["doc"]
        assert_close(item["elmo"], doc._.elmo)
        assert "elmo" not in plain_item
    component = nlp.get_pipe("elmo")
    for got, all_layers in zip(mixed["embeddings"], layers["embeddings"], strict=True):
        all_layers = np.asarray(all_layers, dtype="float32")
        assert_close(got, component.fixed_mix(all_layers))
    for got, all_layers in zip(own["embeddings"], layers["embeddings"], strict=True):
        assert_close(got, mix_layers(np.asarray(all_layers, dtype="float32")))
    assert other_lang.status_code == 422 and other_lang.json()["error"]["code"] == "E210"
    assert info["model"]["kind"] == "pipeline" and info["model"]["elmo_component"] == "elmo"
    assert info["model"]["components"] == ["sentencizer", "elmo"]
    assert set(info["endpoints"]) >= {"POST /v1/parse"}


def test_a_pipeline_without_elmo_is_refused(tmp_path):
    from spacy_elmo.errors import ElmoError

    nlp = spacy.blank("en")
    nlp.add_pipe("sentencizer")
    nlp.to_disk(tmp_path / "nlp")
    with pytest.raises(ElmoError, match=r"^\[E218\] .* \(its components: sentencizer\)"):
        open_served(str(tmp_path / "nlp"))


def test_parse_refuses_bad_input_too(pipeline_dir):
    with client(open_served(str(pipeline_dir)), limits=Limits(max_tokens=4)) as c:
        too_many = c.post("/v1/parse", json={"texts": ["a-b-c-d-e"]})
        not_json = c.post("/v1/parse", content=b"texts", headers={
            "Content-Type": "application/json"})
        npy = c.post("/v1/parse", json={"texts": ["a"]}, headers={"Accept": answers.NPY})
    assert too_many.status_code == 413 and too_many.json()["error"]["code"] == "E203"
    assert not_json.status_code == 400 and not_json.json()["error"]["code"] == "E205"
    assert npy.status_code == 406 and json.loads(npy.content)["error"]["code"] == "E212"
