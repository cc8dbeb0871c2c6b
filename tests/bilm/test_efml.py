"""ELMoForManyLangs models: EFML's own outputs on the tiny fixture, reproduced at atol 1e-5."""

import json
import random
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from spacy_elmo.bilm import BiLMOptions, load_bilm
from spacy_elmo.bilm.embedder import Embedder
from spacy_elmo.bilm.io.efml import efml_batch_order, replay_stateful
from spacy_elmo.cli import app
from spacy_elmo.cli.info import describe_bilm

EFML_DIR = Path(__file__).resolve().parents[1] / "fixtures" / "efml_tiny"
ATOL = 1e-5


def reference(name):
    with h5py.File(EFML_DIR / name, "r") as f:
        return [f[str(i)][...] for i in range(len(f))]


def max_diff(got, expected):
    assert len(got) == len(expected)
    for g, e in zip(got, expected, strict=True):
        assert g.shape == e.shape
    return max(float(np.abs(g - e).max()) for g, e in zip(got, expected, strict=True))


@pytest.fixture(scope="module")
def sentences():
    return json.loads((EFML_DIR / "sentences.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def run_info():
    return json.loads((EFML_DIR / "run_info.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def efml_bilm():
    return load_bilm(EFML_DIR / "model")


def test_legacy_and_zip_pickles_load_identical_weights(efml_bilm):
    zipped = load_bilm(EFML_DIR / "model_zip" / "config.json")  # the file's directory
    assert zipped.dictionary == efml_bilm.dictionary
    assert zipped.options == efml_bilm.options
    ours, theirs = efml_bilm.state_dict(), zipped.state_dict()
    assert ours.keys() == theirs.keys()
    for key in ours:
        assert torch.equal(ours[key], theirs[key]), key


def test_options_roundtrip_and_bilm_tf_options_unchanged(efml_bilm):
    options = efml_bilm.options
    assert options.forget_bias == 0.0 and options.n_words == 55 and options.n_characters == 89
    assert BiLMOptions.from_json_dict(options.to_json_dict()) == options
    plain = BiLMOptions().to_json_dict()
    assert "word_embedding" not in plain and "forget_bias" not in plain["lstm"]
    assert "vocabulary" not in plain["char_cnn"] and plain["char_cnn"]["n_characters"] == 262


def test_ids_follow_efml(efml_bilm):
    """The fixture README's examples (EFML ids; ours are shifted by +1, word id last)."""
    ids = efml_bilm.token_ids()
    words = {w: i for i, w in enumerate(efml_bilm.dictionary.words)}
    chars = {c: i for i, c in enumerate(efml_bilm.dictionary.chars)}

    def efml(token):
        row = ids.token(token) - 1
        return row[:-1].tolist(), int(row[-1])

    assert efml("Hello") == ([87, 34, 7, 22, 22, 2, 86, 85, 85, 85], 14)
    assert efml("<bos>") == ([87, 82, 86] + [85] * 7, 1)
    assert (ids.bos - 1).tolist() == [87, 82, 86] + [85] * 7 + [1]
    assert efml("\U0001F642") == ([87, 84, 86] + [85] * 7, 0)  # one <oov> code point
    assert efml("\u3000")[0][1] == chars["\u3000"] == 78
    assert efml("The")[1] == words["<oov>"] != efml("the")[1]
    # cut to 8 characters for both lookups
    assert efml("Internationalization") == efml("Internat")
    assert efml("Internat")[1] == words["Internat"]
    assert efml("Tiananmen")[1] == words["<oov>"]
    assert efml("café")[1] == words["café"] and efml("cafe\u0301")[1] == words["<oov>"]
    assert efml("cafe\u0301")[0][5] == chars["<oov>"]


def test_stateless_outputs_match_efml_fresh(efml_bilm, sentences):
    expected = reference("outputs_all_fresh.hdf5")
    with torch.inference_mode():
        layers = efml_bilm(efml_bilm.token_ids().batch(sentences)).layers.numpy()
    got = [layers[:, i, : len(s)] for i, s in enumerate(sentences)]
    assert max_diff(got, expected) < ATOL
    # the same through the Embedder (`spacy-elmo embed`): other batches, same vectors
    embedder = Embedder(efml_bilm, batch_size=5)
    assert max_diff(list(embedder.embed(sentences)), expected) < ATOL
    average = Embedder(efml_bilm, batch_size=3, layers="average")
    assert max_diff(list(average.embed(sentences)), [e.mean(0) for e in expected]) < ATOL


@pytest.mark.parametrize("name,batch_size,seed,mean", [
    ("outputs_all.hdf5", 4, 12345, False), ("outputs_avg.hdf5", 4, 12345, True),
    ("outputs_all_bs5.hdf5", 5, 1, False)])
def test_stateful_replay_matches_efml_runs(efml_bilm, sentences, run_info, name, batch_size,
                                           seed, mean):
    lengths = [len(s) for s in sentences]
    order = efml_batch_order(lengths, batch_size, random.Random(seed))
    assert order == run_info[name]["batches_in_processing_order"]
    got = replay_stateful(efml_bilm, sentences, order)
    if mean:
        got = [g.mean(0) for g in got]
    expected = reference(name)
    assert max_diff(got, expected) < ATOL
    # the deterministic default carries no state between batches: it is not this run
    with torch.inference_mode():
        layers = efml_bilm(efml_bilm.token_ids().batch(sentences)).layers.numpy()
    stateless = [layers[:, i, : n] for i, n in enumerate(lengths)]
    assert max_diff([s.mean(0) for s in stateless] if mean else stateless, expected) > 0.1


@pytest.mark.parametrize("key,batch_size,seed", [
    ("batch_order_bs4", 4, 12345), ("batch_order_bs4_seed5", 4, 5),
    ("batch_order_bs5_seed1", 5, 1), ("batch_order_bs1", 1, 12345)])
def test_batch_order_is_efmls(sentences, run_info, key, batch_size, seed):
    lengths = [len(s) for s in sentences]
    order = efml_batch_order(lengths, batch_size, random.Random(seed))
    assert order == run_info["checks"][key]


def test_embed_and_info_cli(tmp_path, sentences):
    # whitespace-split lines cannot hold the U+3000 token of sentence 3
    kept = [i for i, s in enumerate(sentences) if not any(t.isspace() for t in s)]
    text = tmp_path / "in.txt"
    text.write_text("".join(" ".join(sentences[i]) + "\n" for i in kept), encoding="utf-8")
    runner = CliRunner()
    result = runner.invoke(app, ["embed", str(text), str(tmp_path / "out.hdf5"),
                                 "--weights", str(EFML_DIR / "model_zip"), "--batch-size", "4",
                                 "--format", "efml"])
    assert result.exit_code == 0, result.output
    with h5py.File(tmp_path / "out.hdf5", "r") as f:
        got = [f[str(k)][...] for k in range(len(kept))]
    expected = reference("outputs_all_fresh.hdf5")
    assert max_diff(got, [expected[i] for i in kept]) < ATOL

    opts, counts, files = describe_bilm(EFML_DIR / "model")
    stored = sum(t.numel() for name in ("token_embedder.pkl", "encoder.pkl") for t in torch.load(
        EFML_DIR / "model" / name, weights_only=True).values())
    assert counts["total"] == stored == sum(v for k, v in counts.items() if k != "total")
    assert opts.char_vocabulary == "dictionary" and opts.word_dim == 7
    result = runner.invoke(app, ["info", str(EFML_DIR / "model")])
    assert result.exit_code == 0, result.output
    assert "ELMoForManyLangs" in result.output and f"{stored:,}" in result.output
    assert "word.dic" in result.output and dict(files)["format"] == "ELMoForManyLangs"
