"""precision = "int8" in the component: close to fp32, kept by saved pipelines, checked."""

import numpy as np
import pytest
import spacy
import torch

from spacy_elmo.errors import ElmoError

TEXTS = ["The bank raised its rates .", "We sat on the river bank and watched the boats ."]


def _nlp(weights_dir, **model):
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo", config={"weights": str(weights_dir), "store_layers": True,
                                 "model": {"@architectures": "spacy-elmo.ElmoModel.v1",
                                           **model}})
    return nlp


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(-1) / (np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1))


def test_an_int8_component_is_close_to_fp32_and_saves_as_int8(weights_dir, tmp_path):
    fp32, int8 = _nlp(weights_dir), _nlp(weights_dir, precision="int8")
    for text in TEXTS:
        a, b = fp32(text)._.elmo_layers, int8(text)._.elmo_layers
        assert not np.array_equal(a, b)  # the int8 path ran
        assert _cosines(a, b).mean(-1).min() >= 0.99
    expected = [d._.elmo_layers for d in int8.pipe(TEXTS)]
    int8.to_disk(tmp_path / "int8")
    loaded = spacy.load(tmp_path / "int8")
    assert loaded.config["components"]["elmo"]["model"]["precision"] == "int8"
    for got, want in zip(loaded.pipe(TEXTS), expected, strict=True):
        np.testing.assert_array_equal(got._.elmo_layers, want)
    # the config wins over what was saved: the same pipeline loaded as fp32
    as_fp32 = spacy.load(tmp_path / "int8", config={
        "components": {"elmo": {"model": {"precision": "fp32"}}}})
    np.testing.assert_allclose(as_fp32(TEXTS[0])._.elmo_layers, fp32(TEXTS[0])._.elmo_layers,
                               atol=1e-5)


def test_an_unknown_precision_is_refused_when_the_pipeline_is_built(weights_dir):
    with pytest.raises(ElmoError, match=r"\[E020\].*precision"):
        _nlp(weights_dir, precision="int4")


def test_int8_training_updates_run_fp32(weights_dir):
    """A fine-tuning step runs the fp32 path (int8 copies serve inference only)."""
    nlp = _nlp(weights_dir, precision="int8")
    doc = nlp(TEXTS[0])
    model = nlp.get_pipe("elmo").model
    outputs, backprop = model.begin_update([nlp.make_doc(TEXTS[0])])
    fp32 = _nlp(weights_dir)(TEXTS[0])._.elmo_layers
    np.testing.assert_allclose(outputs[0], fp32, atol=1e-5)
    assert not np.allclose(doc._.elmo_layers, fp32, atol=1e-6)
    backprop([np.ones_like(outputs[0])])
    bilm = model.layers[0].shims[0]._model.bilm
    assert any(p.grad is not None and torch.count_nonzero(p.grad) for p in bilm.parameters())
