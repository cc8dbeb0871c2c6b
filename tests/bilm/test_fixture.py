"""The published-weights contract: AllenNLP's own fixture, reproduced at atol 1e-6."""

import h5py
import numpy as np
import pytest
import torch

from spacy_elmo.bilm import StatefulBiLM, batch_to_ids, load_bilm
from spacy_elmo.bilm.directions import concurrent_directions


@pytest.fixture(scope="module")
def fixture_bilm(fixture_dir):
    return load_bilm(fixture_dir / "lm_weights.hdf5", fixture_dir / "options.json")


def _expected(fixture_dir, k, i):
    with h5py.File(fixture_dir / f"lm_embeddings_{k}.hdf5", "r") as f:
        data = f[str(i)][...]
    return np.concatenate([data[0], data[1]], axis=-1)


@pytest.mark.parametrize("directions", ["off", "on"])
def test_top_layer_stateful_matches_reference(fixture_bilm, fixture_dir, fixture_sentences,
                                              directions):
    """Stacked directions, and each on its own thread."""
    runner = StatefulBiLM(fixture_bilm)
    with torch.inference_mode(), concurrent_directions(directions):
        for i in range(10):
            batch = [fixture_sentences[k][i].split() for k in range(3)]
            out = runner(batch_to_ids(batch))
            for k, tokens in enumerate(batch):
                assert int(out.mask[k].sum()) == len(tokens)
                got = out.layers[2, k, : len(tokens)].numpy()
                np.testing.assert_allclose(got, _expected(fixture_dir, k, i), atol=1e-6,
                                           rtol=1e-5)


def test_stateless_first_batch_matches_and_later_batches_do_not(fixture_bilm, fixture_dir,
                                                                 fixture_sentences):
    with torch.inference_mode():
        for i in (0, 1):
            batch = [fixture_sentences[k][i].split() for k in range(3)]
            out = fixture_bilm(batch_to_ids(batch))
            got = out.layers[2, 0, : len(batch[0])].numpy()
            close = np.allclose(got, _expected(fixture_dir, 0, i), atol=1e-6, rtol=1e-5)
            assert close == (i == 0)


def test_reset_state_restores_first_batch(fixture_bilm, fixture_sentences):
    runner = StatefulBiLM(fixture_bilm)
    batch = batch_to_ids([fixture_sentences[k][0].split() for k in range(3)])
    with torch.inference_mode():
        first = runner(batch).layers
        second = runner(batch).layers
        runner.reset_state()
        third = runner(batch).layers
    assert not torch.allclose(first, second)
    assert torch.equal(first, third)


def test_token_layer_matches_reference(fixture_bilm, fixture_dir):
    words = (fixture_dir / "vocab_test.txt").read_text(encoding="utf-8").splitlines()
    with h5py.File(fixture_dir / "elmo_token_embeddings.hdf5", "r") as f:
        expected = f["embedding"][...]
    sentences = [words[i : i + 50] for i in range(0, len(words), 50)]
    with torch.inference_mode():
        out = fixture_bilm(batch_to_ids(sentences))
    width = expected.shape[1]
    got = out.layers[0][out.mask][:, :width].numpy()
    assert got.shape == expected.shape
    np.testing.assert_allclose(got, expected, atol=1e-6, rtol=1e-5)
    # layer 0 is the token layer duplicated
    np.testing.assert_array_equal(out.layers[0][..., :width], out.layers[0][..., width:])


@pytest.mark.parametrize("token,position", [("<S>", 0), ("</S>", -1)])
def test_boundary_tokens_equal_added_boundaries(fixture_bilm, token, position):
    with torch.inference_mode():
        alone, _ = fixture_bilm.embed_sequence(batch_to_ids([[token]]))
        framed, lengths = fixture_bilm.embed_sequence(
            fixture_bilm.add_boundaries(batch_to_ids([["hello", "world"]])))
    boundary = framed[0, 0] if position == 0 else framed[0, int(lengths[0]) - 1]
    torch.testing.assert_close(alone[0, 0], boundary, rtol=0, atol=1e-6)
