"""The component's settings declared once: where its biLM comes from (one BilmSource), what a
loaded pipeline takes from its config (one list), the defaults it shares with `embed`; and
non-finite weights refused at initialize."""

import dataclasses
import inspect

import h5py
import numpy as np
import pytest
import spacy

from spacy_elmo.bilm import save_bilm
from spacy_elmo.bilm.io.sources import BilmSource
from spacy_elmo.bilm.windows import WINDOW, WORD_CACHE
from spacy_elmo.embed.job import embed_file
from spacy_elmo.errors import ElmoError
from spacy_elmo.ml.elmo_model import build_elmo_model
from spacy_elmo.ml.listener import replace_listener_cfg
from spacy_elmo.ml.serialize import CONFIGURED
from spacy_elmo.ml.settings import CONFIG_NAMES, ElmoSettings

from ..conftest import make_random_bilm


def test_initialize_refuses_non_finite_weights(tmp_path):
    save_bilm(make_random_bilm(), tmp_path / "nan")
    with h5py.File(tmp_path / "nan" / "weights.hdf5", "r+") as f:
        data = f["RNN_0/RNN/MultiRNNCell/Cell0/LSTMCell/B"][...]
        data[:7] = np.nan
        f["RNN_0/RNN/MultiRNNCell/Cell0/LSTMCell/B"][...] = data
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo", config={"weights": str(tmp_path / "nan")})
    with pytest.raises(ElmoError, match=r"\[E046\] .*weights.hdf5' holds 7 non-finite "
                                        r"value\(s\) \(NaN or infinity\) in "
                                        r"'RNN_0/RNN/MultiRNNCell/Cell0/LSTMCell/B':"):
        nlp.initialize()


def test_the_source_is_one_value_under_the_config_keys(weights_dir):
    nlp = spacy.blank("en")
    elmo = nlp.add_pipe("elmo", config={"weights": str(weights_dir),
                                        "weights_format": "allennlp"})
    assert elmo.source == BilmSource(str(weights_dir), None, "allennlp")
    assert {k: elmo.cfg[k] for k in ("weights", "options", "weights_format")} == \
        elmo.source.to_cfg()
    cfg = replace_listener_cfg({"@architectures": "spacy-elmo.ElmoModel.v1"},
                               {"grad_factor": 0.5}, source=elmo.source)
    assert cfg == {"@architectures": "spacy-elmo.ElmoTok2Vec.v2",
                   "elmo": {"@architectures": "spacy-elmo.ElmoModel.v1"},
                   "weights": str(weights_dir), "options": None,
                   "weights_format": "allennlp", "grad_factor": 0.5}
    assert "weights_format" not in replace_listener_cfg({}, {}, source=BilmSource("w"))


def test_a_private_biLM_keeps_its_source_out_of_its_saved_bytes(weights_dir):
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo", config={"weights": str(weights_dir)})
    model = spacy.registry.resolve({"m": {"@architectures": "spacy-elmo.ElmoTok2Vec.v2",
                                          "elmo": {"@architectures": "spacy-elmo.ElmoModel.v1"},
                                          "weights": str(weights_dir)}})["m"]
    model.initialize(X=[nlp.make_doc("Hi there .")])
    elmo = next(n for n in model.walk() if n.name == "elmo")
    assert elmo.attrs["source"] == BilmSource(str(weights_dir))
    copy = spacy.registry.resolve({"m": {"@architectures": "spacy-elmo.ElmoTok2Vec.v2",
                                         "elmo": {"@architectures": "spacy-elmo.ElmoModel.v1"},
                                         "weights": None}})["m"]
    copy.from_bytes(model.to_bytes())  # the biLM travels; the source is the config's
    copied = next(n for n in copy.walk() if n.name == "elmo")
    assert copied.attrs["source"] == BilmSource()
    doc = nlp.make_doc("Hi there .")
    np.testing.assert_array_equal(copy.predict([doc])[0], model.predict([doc])[0])


def test_configured_settings_are_one_list():
    """The component's configured settings are one list; ElmoModel's are one object, each
    argument of its architecture one field of it."""
    assert {"store_layers", "set_vector_hooks", "mix_weights", "gamma"} <= set(CONFIGURED)
    assert "weights" not in CONFIGURED  # the saved biLM's source is saved with it
    arguments = set(inspect.signature(build_elmo_model).parameters)
    fields = {CONFIG_NAMES.get(f.name, f.name) for f in dataclasses.fields(ElmoSettings)}
    assert arguments == fields


def test_component_and_embed_share_their_defaults():
    model = inspect.signature(build_elmo_model).parameters
    embed = inspect.signature(embed_file).parameters
    assert model["max_sentence_tokens"].default == embed["window"].default == WINDOW == 200
    assert model["word_cache_size"].default == embed["word_cache"].default == WORD_CACHE


def test_the_factory_setting_no_longer_shadows_the_hook_function():
    from spacy_elmo.pipeline import component

    assert not hasattr(component, "set_vector_hooks")
