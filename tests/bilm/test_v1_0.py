"""The biLMs written by spacy-elmo 1.0 (tests/fixtures/v1_0: a tiny random biLM saved with
save_bilm, and the export of a pretraining run) load and give the layers 1.0 gave, on text
with accents, combining marks, CJK, right-to-left script, emoji with joiners, invisible
characters and a token past the character budget. Never regenerate the fixture."""

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from spacy_elmo.bilm import batch_to_ids, load_bilm

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "v1_0"
EXPECTED = json.loads((FIXTURE / "expected.json").read_text(encoding="utf-8"))
pytestmark = pytest.mark.filterwarnings("ignore:.W002.")  # one text has a token over 50 bytes


@pytest.fixture(scope="module")
def arrays():
    with np.load(FIXTURE / "expected.npz") as data:
        return dict(data)


def layers(bilm, sentences):
    with torch.no_grad():
        out = bilm(batch_to_ids(sentences))
    return [out.layers[:, i, : len(s)].numpy() for i, s in enumerate(sentences)]


@pytest.mark.parametrize("model, key, sentences", [
    ("bilm", "bilm", [doc["tokens"] for doc in EXPECTED["pipeline"]]),
    ("pretrain/run/model", "run_model", [text.split() for text in EXPECTED["texts"]]),
])
def test_a_biLM_of_1_0_gives_its_layers(arrays, model, key, sentences):
    bilm = load_bilm(FIXTURE / model)
    assert len(sentences) == 5
    batched = layers(bilm, sentences)
    for i, sentence in enumerate(sentences):
        expected = arrays[f"{key}_{i}"]
        assert expected.shape == (3, len(sentence), 2 * bilm.options.projection_dim)
        np.testing.assert_allclose(batched[i], expected, atol=1e-5, rtol=0)
        alone, = layers(bilm, [sentence])  # the same whatever else is in the batch
        np.testing.assert_allclose(alone, expected, atol=1e-5, rtol=0)
