"""`spacy-elmo embed` / `info` and the Embedder behind them."""

import itertools
import json
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from spacy_elmo.bilm import batch_to_ids, load_bilm
from spacy_elmo.bilm.embedder import Embedder
from spacy_elmo.cli import app
from spacy_elmo.cli.info import describe_bilm
from spacy_elmo.embed.files import read_lines

from ..conftest import TINY_OPTIONS, make_random_bilm

runner = CliRunner()
WIDTH = TINY_OPTIONS.output_dim
SENTS = ["The bank raised rates .", "We sat on the river bank .", "", "Hi",
         "A much longer sentence with emoji 🙂 and 中文 text ."]


@pytest.fixture(scope="module")
def fixture_bilm(fixture_dir):
    return load_bilm(fixture_dir / "lm_weights.hdf5", fixture_dir / "options.json")


def write_text(path, lines):
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def invoke(*args):
    result = runner.invoke(app, [str(a) for a in args])
    assert result.exit_code == 0, result.output
    return result


def test_stateful_embed_reproduces_fixture(tmp_path, fixture_dir, fixture_sentences):
    lines = [fixture_sentences[k][i] for i in range(10) for k in range(3)]
    text = write_text(tmp_path / "in.txt", lines)
    invoke("embed", text, tmp_path / "out.hdf5", "--weights", fixture_dir / "lm_weights.hdf5",
           "--options", fixture_dir / "options.json", "--stateful", "--batch-size", 3,
           "--layers", "top")
    with h5py.File(tmp_path / "out.hdf5", "r") as out:
        for n in range(30):
            i, k = divmod(n, 3)
            with h5py.File(fixture_dir / f"lm_embeddings_{k}.hdf5", "r") as f:
                expected = np.concatenate(list(f[str(i)][...]), axis=-1)
            np.testing.assert_allclose(out[str(n)][...], expected, atol=1e-6, rtol=1e-5)
        index = json.loads(out["sentence_to_index"][0])
    assert index[lines[4]] == "4" and len(index) == 30


@pytest.mark.parametrize("layers", ["all", "top", "average"])
def test_layers_shapes_and_values(tmp_path, tiny_weights_dir, layers):
    text = write_text(tmp_path / "in.txt", SENTS)
    invoke("embed", text, tmp_path / "out.hdf5", "--weights", tiny_weights_dir,
           "--layers", layers, "--batch-size", 2)
    bilm = load_bilm(tiny_weights_dir)
    with torch.no_grad():
        ref = bilm(batch_to_ids([s.split() for s in SENTS])).layers.numpy()
    with h5py.File(tmp_path / "out.hdf5", "r") as out:
        assert sorted(out.keys()) == sorted([str(i) for i in range(5)] + ["sentence_to_index"])
        for i, sentence in enumerate(SENTS):
            n = len(sentence.split())
            expected = ref[:, i, :n]
            expected = {"all": expected, "top": expected[-1],
                        "average": expected.mean(0)}[layers]
            got = out[str(i)][...]
            assert got.shape == expected.shape
            assert got.shape[-2:] == (n, WIDTH)
            np.testing.assert_allclose(got, expected, atol=1e-6, rtol=0)


def test_output_file_has_the_usual_permissions(tmp_path, tiny_weights_dir):
    text = write_text(tmp_path / "in.txt", ["a"])
    invoke("embed", text, tmp_path / "out.hdf5", "--weights", tiny_weights_dir)
    (tmp_path / "plain").touch()
    assert (tmp_path / "out.hdf5").stat().st_mode == (tmp_path / "plain").stat().st_mode


def test_empty_line_gives_empty_dataset(tmp_path, tiny_weights_dir):
    text = write_text(tmp_path / "in.txt", ["a b", "", "   ", "c"])
    invoke("embed", text, tmp_path / "out.hdf5", "--weights", tiny_weights_dir)
    with h5py.File(tmp_path / "out.hdf5", "r") as out:
        assert out["1"].shape == (3, 0, WIDTH) and out["2"].shape == (3, 0, WIDTH)
        assert out["3"].shape == (3, 1, WIDTH)
        assert json.loads(out["sentence_to_index"][0]) == {"a b": "0", "": "2", "c": "3"}


def test_deterministic_mode_keeps_input_order_and_ignores_batching(tiny_bilm):
    # distinct sentences of many lengths, so that any reordering shows
    sentences = [[f"{w}{k}" for w in s.split()] for k in range(3) for s in SENTS]
    alone = [next(Embedder(tiny_bilm, batch_size=1).embed([s])) for s in sentences]
    assert len({a.tobytes() for a in alone if a.size}) == len([a for a in alone if a.size])
    batched = list(Embedder(tiny_bilm, batch_size=4, chunk_tokens=20).embed(sentences))
    assert len(batched) == len(sentences)
    for a, b in zip(alone, batched, strict=True):
        np.testing.assert_allclose(a, b, atol=1e-6, rtol=0)


def test_word_cache_is_on_by_default_and_exact():
    sentences = [s.split() for s in SENTS] * 2
    plain = list(Embedder(make_random_bilm(), word_cache=0).embed(sentences))
    embedder = Embedder(make_random_bilm(), batch_size=2)
    cached = list(embedder.embed(sentences))
    cache = embedder.bilm.word_cache
    assert cache is not None and cache.hits > 0
    for a, b in zip(plain, cached, strict=True):
        np.testing.assert_allclose(a, b, atol=1e-6, rtol=0)


def test_embedding_is_lazy(tiny_bilm):
    endless = (["word", str(i)] for i in itertools.count())
    first = list(itertools.islice(Embedder(tiny_bilm, chunk_tokens=64).embed(endless), 3))
    assert [a.shape for a in first] == [(3, 2, WIDTH)] * 3


def test_long_line_runs_in_bounded_windows(fixture_bilm, fixture_sentences):
    tokens = [t for group in fixture_sentences for s in group for t in s.split()]
    long = (tokens * 7)[:5000]
    seen = []
    original = fixture_bilm.forward

    def spy(char_ids, state=None):
        seen.append(tuple(char_ids.shape[:2]))
        return original(char_ids, state)

    fixture_bilm.forward = spy  # type: ignore[method-assign]
    try:
        embedder = Embedder(fixture_bilm, batch_size=8, window=200, context=50,
                            max_batch_tokens=1000)
        windowed, short = embedder.embed([long, ["short", "line"]])
    finally:
        del fixture_bilm.forward
    assert windowed.shape == (3, 5000, 32) and short.shape == (3, 2, 32)
    assert max(steps for _, steps in seen) == 300
    assert all(rows * steps <= 1000 for rows, steps in seen)
    with torch.inference_mode():
        full = fixture_bilm(batch_to_ids([long])).layers[:, 0].numpy()
    np.testing.assert_array_equal(windowed[0], full[0])  # the token layer is exact
    # the documented approximation: 50 tokens of context keep the LSTM layers within 1e-4
    np.testing.assert_allclose(windowed, full, atol=1e-4, rtol=0)
    assert not np.allclose(windowed, full, atol=1e-7, rtol=0)


def test_huge_token_is_cut_to_the_byte_budget(tiny_bilm):
    huge = "x" * 10_000
    got, cut = Embedder(tiny_bilm).embed([["a", huge], ["a", "x" * 48]])
    assert got.shape == (3, 2, WIDTH)
    np.testing.assert_array_equal(got, cut)


@pytest.mark.parametrize("max_chars", [50, 20])
def test_tokens_of_every_length_match_the_reference(max_chars):
    """The encoder's shortcuts (windows cut to each token's length, chunks) stay exact."""
    from ..bilm.test_model import reference_forward

    options = TINY_OPTIONS.replace(max_characters_per_token=max_chars, activation="tanh")
    bilm = make_random_bilm(options)
    bilm.encoder.positions_per_chunk = 40  # several chunks
    tokens = ["x" * k for k in range(0, 60, 3)] + ["中" * 20, "<S>", "a"]
    with torch.no_grad():
        got = bilm(batch_to_ids([tokens], max_chars)).layers[:, 0]
        torch.testing.assert_close(got, reference_forward(bilm, tokens), atol=1e-5, rtol=1e-5)


def test_input_projection_groups_change_nothing(tiny_bilm):
    """Long batches project their inputs in groups of steps: same values, same gradients."""
    ids = batch_to_ids([s.split() for s in SENTS])
    whole = tiny_bilm(ids).layers
    whole.sum().backward()
    grad = tiny_bilm.lstm.layers[0].w_input.grad.clone()
    tiny_bilm.zero_grad()
    for layer in tiny_bilm.lstm.layers:
        layer.projection_rows = 3
    grouped = tiny_bilm(ids).layers
    grouped.sum().backward()
    torch.testing.assert_close(grouped, whole, atol=1e-6, rtol=0)
    torch.testing.assert_close(tiny_bilm.lstm.layers[0].w_input.grad, grad, atol=1e-5, rtol=0)


def test_read_lines_is_lazy_and_strips(tmp_path):
    path = tmp_path / "in.txt"
    path.write_bytes(b" a  b \r\n\nc")
    assert list(read_lines(path)) == ["a  b", "", "c"]


def test_info_counts_every_parameter(tiny_weights_dir):
    opts, counts, _ = describe_bilm(tiny_weights_dir)
    bilm = make_random_bilm()
    n_params = sum(p.numel() for p in bilm.parameters())
    # the hdf5 has no padding row in char_embed
    assert counts["total"] == n_params - opts.char_embed_dim
    assert counts["total"] == sum(v for k, v in counts.items() if k != "total")
    result = invoke("info", tiny_weights_dir)
    assert f"{counts['total']:,}" in result.output
    assert f"each {WIDTH} wide" in result.output


def test_gpu_id_without_cuda_is_a_clear_error(tmp_path, tiny_weights_dir):
    if torch.cuda.is_available():
        pytest.skip("CUDA is available here")
    text = write_text(tmp_path / "in.txt", ["a"])
    result = runner.invoke(app, ["embed", str(text), str(tmp_path / "o.hdf5"), "--weights",
                                 str(tiny_weights_dir), "--gpu-id", "0"])
    assert result.exit_code == 1
    assert "no CUDA device" in result.output


def test_python_m_help():
    result = subprocess.run([sys.executable, "-m", "spacy_elmo", "--help"],
                            capture_output=True, text=True, check=False,
                            cwd=Path(__file__).resolve().parents[2])
    assert result.returncode == 0, result.stderr
    assert "embed" in result.stdout and "info" in result.stdout


def test_threads_sets_torch_threads_and_is_checked(tmp_path, tiny_weights_dir, monkeypatch):
    text = write_text(tmp_path / "in.txt", ["a b"])
    seen = []
    monkeypatch.setattr(torch, "set_num_threads", seen.append)
    invoke("embed", text, tmp_path / "out.hdf5", "--weights", tiny_weights_dir,
           "--threads", 3)
    assert seen == [3] and (tmp_path / "out.hdf5").exists()
    result = runner.invoke(app, ["embed", str(text), str(tmp_path / "o.hdf5"), "--weights",
                                 str(tiny_weights_dir), "--threads", "0"])
    assert result.exit_code == 1 and "E020" in result.output and "--threads" in result.output
    assert not (tmp_path / "o.hdf5").exists()
