"""precision = "int8" and "bf16" in the component: close to fp32, kept by saved pipelines,
checked, and remade after fine-tuning updates."""

import warnings

import numpy as np
import pytest
import spacy
import torch

from spacy_elmo.bilm import hardware
from spacy_elmo.errors import ElmoError
from spacy_elmo.ml.elmo_model import get_holder

TEXTS = ["The bank raised its rates .", "We sat on the river bank and watched the boats ."]


def _nlp(weights_dir, **model):
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo", config={"weights": str(weights_dir), "store_layers": True,
                                 "model": {"@architectures": "spacy-elmo.ElmoModel.v1",
                                           **model}})
    return nlp


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(-1) / (np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1))


def _saves_and_loads_as(nlp, precision, fp32, tmp_path):
    """nlp saved and loaded gives the same vectors at `precision`; the config wins over what
    was saved: the same pipeline loaded as fp32 gives fp32's vectors."""
    expected = [d._.elmo_layers for d in nlp.pipe(TEXTS)]
    nlp.to_disk(tmp_path / precision)
    loaded = spacy.load(tmp_path / precision)
    assert loaded.config["components"]["elmo"]["model"]["precision"] == precision
    for got, want in zip(loaded.pipe(TEXTS), expected, strict=True):
        np.testing.assert_array_equal(got._.elmo_layers, want)
    as_fp32 = spacy.load(tmp_path / precision, config={
        "components": {"elmo": {"model": {"precision": "fp32"}}}})
    np.testing.assert_allclose(as_fp32(TEXTS[0])._.elmo_layers, fp32(TEXTS[0])._.elmo_layers,
                               atol=1e-5)


def test_an_int8_component_is_close_to_fp32_and_saves_as_int8(weights_dir, tmp_path):
    fp32, int8 = _nlp(weights_dir), _nlp(weights_dir, precision="int8")
    for text in TEXTS:
        a, b = fp32(text)._.elmo_layers, int8(text)._.elmo_layers
        assert not np.array_equal(a, b)  # the int8 path ran
        assert _cosines(a, b).mean(-1).min() >= 0.99
    _saves_and_loads_as(int8, "int8", fp32, tmp_path)


def test_an_unknown_precision_is_refused_when_the_pipeline_is_built(weights_dir):
    with pytest.raises(ElmoError, match=r"\[E150\] Unknown precision .int4."):
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
    bilm = get_holder(model).bilm
    assert any(p.grad is not None and torch.count_nonzero(p.grad) for p in bilm.parameters())


@pytest.fixture
def allow_emulated_bf16(monkeypatch):
    """bf16 here even where this CPU emulates it (the same results, only slower)."""
    monkeypatch.setenv(hardware.ALLOW_EMULATED_BF16, "1")
    warnings.simplefilter("ignore")  # W010


def test_a_bf16_component_is_close_to_fp32_and_saves_as_bf16(weights_dir, tmp_path,
                                                              allow_emulated_bf16):
    fp32, bf16 = _nlp(weights_dir), _nlp(weights_dir, precision="bf16")
    for text in TEXTS:
        a, b = fp32(text)._.elmo_layers, bf16(text)._.elmo_layers
        assert b.dtype == np.float32 and not np.array_equal(a, b)  # the bf16 path ran
        assert _cosines(a, b).min() >= 0.999
    _saves_and_loads_as(bf16, "bf16", fp32, tmp_path)


def test_bf16_is_refused_where_emulated_unless_allowed(weights_dir, monkeypatch):
    monkeypatch.setattr(hardware, "native_bf16", lambda device: False)
    monkeypatch.delenv(hardware.ALLOW_EMULATED_BF16, raising=False)
    nlp = _nlp(weights_dir, precision="bf16")
    with pytest.raises(ElmoError, match=r"\[E230\] precision 'bf16' on this CPU"):
        nlp(TEXTS[0])


@pytest.mark.parametrize("precision", ["int8", "bf16"])
def test_copies_are_made_again_after_a_fine_tuning_update(weights_dir, precision,
                                                          allow_emulated_bf16):
    """thinc's optimizers write into the parameters' memory, which torch's version counters
    do not see: the update itself drops the int8 or bf16 copies."""
    nlp = _nlp(weights_dir, precision=precision)
    before = nlp(TEXTS[0])._.elmo_layers
    model = nlp.get_pipe("elmo").model
    outputs, backprop = model.begin_update([nlp.make_doc(TEXTS[0])])
    backprop([np.ones_like(outputs[0])])
    model.finish_update(nlp.create_optimizer())
    after = nlp(TEXTS[0])._.elmo_layers
    assert not np.allclose(after, before, atol=1e-4)
    # what a pipeline with the updated weights and fresh copies gives
    bilm = get_holder(model).bilm
    fresh = _nlp(weights_dir, precision=precision)
    fresh(TEXTS[0])
    fresh_bilm = get_holder(fresh.get_pipe("elmo").model).bilm
    fresh_bilm.load_state_dict(bilm.state_dict())
    np.testing.assert_array_equal(fresh(TEXTS[0])._.elmo_layers, after)
