"""A pipeline saved by an earlier version (tests/fixtures/compat) loads and gives the same
vectors and scores as it did then."""

import json
from pathlib import Path

import numpy as np
import spacy

COMPAT = Path(__file__).resolve().parents[1] / "fixtures" / "compat"


def test_pipeline_saved_by_an_earlier_version_loads_unchanged(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # its configs name a biLM at "bilm": not needed to load
    nlp = spacy.load(COMPAT / "pipeline")
    assert nlp.pipe_names == ["elmo", "ner", "textcat"]
    expected = np.load(COMPAT / "pipeline_expected.npz")
    texts = json.loads((COMPAT / "texts.json").read_text())
    for i, doc in enumerate(nlp.pipe(texts)):
        np.testing.assert_allclose(doc._.elmo, expected[f"elmo_{i}"], atol=1e-6)
        np.testing.assert_allclose(doc._.elmo_layers, expected[f"layers_{i}"], atol=1e-6)
        np.testing.assert_allclose([doc.cats["A"], doc.cats["B"]], expected[f"cats_{i}"],
                                   atol=1e-5)
