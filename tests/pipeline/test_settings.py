"""ElmoModel's run-time settings (`ml/settings.ElmoSettings`): one object, applied where a
biLM comes in, all or nothing, kept apart from saved data, and the settings of the model that
runs even when two models share one biLM."""

from pathlib import Path

import numpy as np
import pytest
import spacy
import torch

from spacy_elmo.bilm import hardware
from spacy_elmo.errors import ElmoError
from spacy_elmo.ml.elmo_model import build_elmo_model, configure, get_holder, set_bilm
from spacy_elmo.ml.output_cache import RETIRED, Retired

from ..conftest import make_random_bilm

V1_0 = Path(__file__).resolve().parents[1] / "fixtures" / "v1_0" / "pipeline"


def _docs():
    nlp = spacy.blank("en")
    return [nlp.make_doc("The bank raised its rates ."), nlp.make_doc("A river bank .")]


def test_two_models_sharing_a_biLM_each_run_at_their_own_settings():
    """A biLM shared by two ElmoModels ran at the settings of whichever took it last."""
    torch.manual_seed(0)
    bilm = make_random_bilm()
    cached, uncached = build_elmo_model(word_cache_size=10), build_elmo_model(word_cache_size=0)
    set_bilm(cached, bilm)
    set_bilm(uncached, bilm)
    assert bilm.word_cache is None
    first = cached.predict(_docs())
    assert bilm.word_cache is not None and bilm.word_cache.max_entries == 10
    second = uncached.predict(_docs())
    assert bilm.word_cache is None
    for a, b in zip(first, second, strict=True):
        np.testing.assert_allclose(a, b, atol=1e-6)


def test_settings_a_machine_refuses_change_nothing(monkeypatch):
    """configure() set the dropout, then failed on the precision: the biLM ran at settings
    that were not the model's."""
    model = build_elmo_model()
    set_bilm(model, make_random_bilm())
    bilm = get_holder(model).bilm
    monkeypatch.setattr(hardware, "native_bf16", lambda device: False)
    monkeypatch.delenv(hardware.ALLOW_EMULATED_BF16, raising=False)
    with pytest.raises(ElmoError, match=r"\[E230\]"):
        configure(model, dropout=0.5, precision="bf16", word_cache_size=0)
    assert (bilm.lstm.dropout.p, bilm.precision) == (0.0, "fp32")
    assert bilm.word_cache is not None
    assert get_holder(model).settings.dropout == 0.0


def test_the_settings_1_0_saved_are_read_and_dropped(tmp_path, monkeypatch):
    """1.0 saved ElmoModel's settings as attrs: they were loaded beside the settings that
    run, never read, and saved again."""
    monkeypatch.chdir(tmp_path)
    nlp = spacy.load(V1_0)
    models = [n for _, pipe in nlp.pipeline if hasattr(pipe, "model")
              for n in pipe.model.walk() if n.name == "elmo"]
    assert len(models) == 2  # the component's and textcat's private biLM
    for model in models:
        assert all(isinstance(model.attrs[name], Retired) for name in RETIRED)
        assert list(model.to_dict()["attrs"][0]) == []  # nothing of them is saved again
