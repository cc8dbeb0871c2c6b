"""Request bodies checked into jobs, and content negotiation (no HTTP)."""

import json

import numpy as np
import pytest

from spacy_elmo.serve import answers
from spacy_elmo.serve.inputs import (
    ClientError,
    check_content_type,
    check_declared_length,
    decode_json,
    embed_job,
    parse_job,
)
from spacy_elmo.serve.limits import Limits
from spacy_elmo.serve.served import Embedded, Parsed

from .conftest import split_lengths

LIMITS = Limits(max_request_bytes=1000, max_sentences=3, max_tokens=10)


def refused(call, *args):
    with pytest.raises(ClientError) as err:
        call(*args)
    return err.value


def body(value):
    return json.dumps(value).encode("utf-8")


@pytest.mark.parametrize("raw,code,status,words", [
    (b"", "E205", 400, "empty"),
    (b"  \n", "E205", 400, "empty"),
    (b'{"sentences": [["caf\xe9"]]}', "E204", 400, "byte 20"),
    (b"\xef\xbb", "E204", 400, "byte 0"),
    (b'{"sentences": ', "E205", 400, "line 1, column 15"),
    (b'{"gamma": NaN}', "E205", 400, "NaN"),
    (b'{"gamma": -Infinity}', "E205", 400, "Infinity"),
    (b'{"gamma": 1e999}', "E205", 400, "out of range"),
    (b'{"gamma": ' + b"9" * 5000 + b"}", "E205", 400, "digits"),
    (b"[" * 100_000 + b"]" * 100_000, "E205", 400, "nested too deeply"),
])
def test_bodies_that_are_not_json_text(raw, code, status, words):
    err = refused(decode_json, raw)
    assert (err.code, err.status) == (code, status) and words in str(err)


def test_a_byte_order_mark_is_ignored_and_odd_unicode_kept():
    text = "\u200b\u202e\U0001f642e\u0301\uffff"  # zero width, RTL override, emoji, combining
    assert decode_json(b"\xef\xbb\xbf" + body({"texts": [text]})) == {"texts": [text]}


@pytest.mark.parametrize("value,code,words", [
    ([1], "E206", "the body: Input should be a valid dictionary"),
    ({"sentences": [["a", 1]]}, "E206", "sentences[0][1]: Input should be a valid string"),
    ({"sentences": "a b"}, "E206", "sentences: Input should be a valid list"),
    ({"sentences": [["a"]], "layers": "bottom"}, "E206", "layers: Input should be 'all'"),
    ({"sentences": [["a"]], "path": "/etc/passwd"}, "E206", "path: Extra inputs"),
    ({"sentences": [["a"]], "gamma": "1"}, "E206", "gamma: Input should be a valid number"),
    ({}, "E207", "neither `sentences` nor `texts`"),
    ({"sentences": [["a"]], "texts": ["a"]}, "E207", "both"),
    ({"sentences": []}, "E207", "an empty `sentences` list"),
    ({"sentences": [["a"]] * 4}, "E202", "4 sentences, more than this server's limit of 3"),
    ({"texts": ["a"] * 4}, "E202", "4 texts"),
    ({"sentences": [["a"] * 6, ["b"] * 5]}, "E203", "11 tokens, more than this server's "
                                                     "limit of 10"),
    ({"texts": ["a " * 11]}, "E203", "11 tokens"),
    ({"sentences": [["a", ""]]}, "E208", "Sentence 0, token 1 ('') is empty"),
    ({"sentences": [["a b"]]}, "E208", "holds whitespace"),
    ({"sentences": [["a\u00a0b"]]}, "E208", "holds whitespace"),  # no-break space
    ({"sentences": [["a\u2028"]]}, "E208", "holds whitespace"),  # line separator
    ({"sentences": [["a\x00"]]}, "E208", "NUL"),
    ({"sentences": [["\ud800"]]}, "E208", "lone surrogate U+D800"),
    ({"texts": ["ok", "bad \udfff"]}, "E208", "Text 1 holds a lone surrogate U+DFFF"),
    ({"texts": ["x"], "lang": "../en"}, "E210", "not a language code"),
    ({"sentences": [["a"]], "mix_weights": [1, 1, 1]}, "E211", "layers 'all'"),
    ({"sentences": [["a"]], "layers": "mix", "mix_weights": [1, 1]}, "E211", "3 non-negative"),
    ({"sentences": [["a"]], "layers": "mix", "mix_weights": [1, -1, 1]}, "E211", "[1.0, -1.0"),
    ({"sentences": [["a"]], "layers": "mix", "mix_weights": [0, 0, 0]}, "E211", "positive"),
    ({"sentences": [["a"]], "layers": "mix", "gamma": 1e39}, "E211", "gamma 1e+39"),
    ({"sentences": [["a"]], "layers": "mix", "gamma": -1e39}, "E211", "float32 holds"),
])
def test_embed_requests_that_are_refused(value, code, words):
    err = refused(embed_job, body(value), LIMITS, 3)
    assert err.code == code and words in str(err), str(err)
    assert err.status == {"E202": 413, "E203": 413}.get(code, 422)


def test_a_good_embed_request_becomes_a_job():
    job = embed_job(body({"sentences": [["The", "cat"], []], "layers": "mix",
                          "mix_weights": [1, 2, 3], "gamma": 2}), LIMITS, 3)
    assert job.sentences == [["The", "cat"], []] and job.layers == "mix"
    assert job.mix_weights == [1.0, 2.0, 3.0] and job.gamma == 2.0
    assert job.cost == 4 + 2  # each sentence with <S> and </S>
    texts = embed_job(body({"texts": ["Hello world"], "lang": "de"}), LIMITS, 3)
    assert texts.texts == ["Hello world"] and texts.lang == "de" and texts.cost == 4


def test_texts_without_spaces_cost_a_token_a_wide_character():
    """Batching counts what spaCy's tokenizers will make of a text: Chinese or Japanese is
    about a token a character, not one token for the whole run of characters."""
    limits = Limits(max_tokens=100)
    job = embed_job(body({"texts": ["我们在银行工作", "苹果 apple"], "lang": "zh"}), limits, 3)
    assert job.cost == (7 + 2) + (2 + 1 + 2)
    long = embed_job(body({"texts": ["字" * 5000], "lang": "zh"}), limits, 3)
    assert long.cost == 100 + 2  # at most the token limit (more is refused once tokenized)
    assert parse_job(body({"texts": ["東京は大きい"]}), limits).cost == 6 + 2


def test_parse_requests():
    assert parse_job(body({"texts": ["A b."], "elmo": True}), LIMITS).elmo is True
    assert refused(parse_job, body({"texts": []}), LIMITS).code == "E207"
    assert refused(parse_job, body({"texts": ["a"], "sentences": [["a"]]}), LIMITS).code == \
        "E206"
    assert refused(parse_job, body({"texts": ["a"], "elmo": "yes"}), LIMITS).code == "E206"


@pytest.mark.parametrize("value,ok", [
    (None, True), ("application/json", True), ("application/json; charset=UTF-8", True),
    ("application/vnd.api+json", True), ("text/plain", False),
    ("application/x-www-form-urlencoded", False), ("application/json; charset=latin-1", False),
])
def test_content_types(value, ok):
    if ok:
        check_content_type(value)
    else:
        err = refused(check_content_type, value)
        assert (err.code, err.status, err.close) == ("E213", 415, True)


def test_a_declared_length_over_the_limit_is_refused_before_reading():
    check_declared_length("1000", LIMITS)
    err = refused(check_declared_length, "1001", LIMITS)
    assert (err.code, err.status, err.close) == ("E201", 413, True)
    assert "1001 bytes, over this server's limit of 1000 bytes" in str(err)


@pytest.mark.parametrize("accept,chosen", [
    (None, answers.JSON), ("", answers.JSON), ("*/*", answers.JSON),
    ("application/x-npy", answers.NPY), ("application/*;q=0.5, application/x-npy", answers.NPY),
    ("application/octet-stream;q=0.9, application/json;q=0.2", answers.RAW),
    ("text/html, */*;q=0.1", answers.JSON), ("application/json;q=0, */*", answers.NPY),
])
def test_accept_headers(accept, chosen):
    assert answers.negotiate(accept, answers.EMBED_TYPES) == chosen


@pytest.mark.parametrize("accept", ["text/html", "application/json;q=0", "image/*"])
def test_accept_headers_that_take_nothing_offered(accept):
    err = refused(answers.negotiate, accept, answers.EMBED_TYPES)
    assert (err.code, err.status) == ("E212", 406)


def test_json_answers_over_the_limit_are_refused_and_binary_ones_kept():
    arrays = [np.zeros((3, 4, 5), dtype="float32")]  # 60 numbers
    answer = Embedded(layers="all", width=5, arrays=arrays)
    assert json.loads(answers.embed_body(answer, answers.JSON, 60)[0])["width"] == 5
    err = refused(answers.embed_body, answer, answers.JSON, 59)
    assert (err.code, err.status) == ("E271", 413) and "60 numbers" in str(err)
    assert "application/x-npy" in str(err) and "--max-json-values" in str(err)
    raw, _ = answers.embed_body(answer, answers.RAW, 59)
    assert len(raw) == 60 * 4
    parsed = Parsed(docs=[{"text": "a"}], vectors=[np.zeros((4, 5), dtype="float32")])
    assert json.loads(answers.parse_body(parsed, 20))["docs"][0]["elmo"][0] == [0.0] * 5
    assert refused(answers.parse_body, parsed, 19).code == "E271"


def test_binary_answers_split_back_into_sentences():
    arrays = [np.random.rand(3, n, 4).astype("float32") for n in (2, 0, 5)]
    answer = Embedded(layers="all", width=4, arrays=arrays)
    raw, headers = answers.embed_body(answer, answers.RAW, 10**6)
    assert headers["X-Elmo-Lengths"] == "2,0,5" and headers["X-Elmo-Shape"] == "3,7,4"
    flat = np.frombuffer(raw, dtype="<f4").reshape(3, 7, 4)
    for got, want in zip(split_lengths(flat, headers["X-Elmo-Lengths"]), arrays,
                         strict=True):
        assert np.array_equal(got, want)
    assert json.loads(answers.embed_body(answer, answers.JSON, 10**6)[0])["embeddings"][2] == \
        arrays[2].tolist()
