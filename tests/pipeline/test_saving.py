"""Saved and copied pipelines: complete before first use, the size of their weights when
pickled, listeners of a frozen `elmo` component that say what to do, a biLM of another width
under a trained task, damaged files that are named, and what spacy-elmo 0.1 saved (a biLM
without its checksum, a mix without its width, the private tok2vec of 0.1) refused."""

import pickle
import shutil
from pathlib import Path

import numpy as np
import pytest
import spacy
import srsly
import torch
from catalogue import RegistryError
from spacy.training import Example
from spacy.training.initialize import init_nlp
from spacy_elmo_lab.tiny import toy_docs
from thinc.api import Config

from spacy_elmo.bilm import BiLMOptions, WordCache, batch_to_ids, load_bilm, save_bilm
from spacy_elmo.errors import ElmoError
from spacy_elmo.ml.elmo_model import get_holder, settings_of
from spacy_elmo.ml.serialize import CHECKSUM
from spacy_elmo.pipeline import ElmoListener

from ..conftest import make_random_bilm
from .conftest import CONFIGS

TEXT = "The bank raised rates. We sat on the river bank."


def test_to_disk_before_first_use_saves_the_weights(tmp_path):
    """It saved no weights (227 bytes), so spacy.load needed the original files."""
    weights = tmp_path / "weights"
    save_bilm(make_random_bilm(), weights)
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo", config={"weights": str(weights)})
    nlp.to_disk(tmp_path / "pipeline")
    data = nlp.get_pipe("elmo").to_bytes()
    expected = nlp(TEXT)._.elmo
    shutil.rmtree(weights)
    loaded = spacy.load(tmp_path / "pipeline")
    np.testing.assert_allclose(loaded(TEXT)._.elmo, expected, atol=1e-6)
    fresh = spacy.blank("en")
    fresh.add_pipe("elmo", config={"weights": str(weights)})
    fresh.get_pipe("elmo").from_bytes(data)
    np.testing.assert_allclose(fresh(TEXT)._.elmo, expected, atol=1e-6)


def test_a_used_pipeline_pickles_at_the_size_of_its_weights(weights_dir):
    """The word cache kept row views whose whole batch storage pickled with each of them
    (40 docs: 330 MB against 12 MB of to_bytes). Using the pipeline may grow its pickle
    only as it grows to_bytes (new vocabulary strings), not by what its caches hold."""
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo", config={"weights": str(weights_dir)})
    nlp("warm up")
    fresh_pickle, fresh_bytes = len(pickle.dumps(nlp)), len(nlp.to_bytes())
    words = [f"w{i}" for i in range(400)]
    texts = [" ".join(words[i : i + 40]) for i in range(0, 400, 10)]
    expected = [doc._.elmo for doc in nlp.pipe(texts, batch_size=8)]
    bilm = get_holder(nlp.get_pipe("elmo").model).bilm
    assert len(bilm.word_cache) >= 400
    growth = len(pickle.dumps(nlp)) - fresh_pickle
    assert growth < 3 * (len(nlp.to_bytes()) - fresh_bytes) + 4096, growth
    restored = pickle.loads(pickle.dumps(nlp))
    for text, vectors in zip(texts, expected, strict=True):
        np.testing.assert_allclose(restored(text)._.elmo, vectors, atol=1e-6)


def test_word_cache_entries_own_their_memory(tiny_bilm):
    tiny_bilm.word_cache = WordCache(100)
    with torch.no_grad():
        tiny_bilm(batch_to_ids([["a", "b", "c", "d"]]))
    entries = list(tiny_bilm.word_cache._entries.values())
    assert len(entries) == 6  # with <S> and </S>
    assert all(e.untyped_storage().nbytes() == e.numel() * e.element_size() for e in entries)


def test_a_biLM_loaded_under_inference_mode_takes_a_word_cache(tiny_weights_dir):
    """Serving code loads weights inside torch.inference_mode(); the cache's weight stamp
    then failed: "Inference tensors do not track version counter"."""
    with torch.inference_mode():
        bilm = load_bilm(tiny_weights_dir)
    reference = load_bilm(tiny_weights_dir)
    bilm.word_cache = WordCache(100)
    ids = batch_to_ids([["a", "b", "a"], ["c"]])
    for context in (torch.no_grad, torch.inference_mode):
        with context():
            torch.testing.assert_close(bilm(ids).layers, reference(ids).layers,
                                       atol=0, rtol=0)
    assert bilm.word_cache.hits > 0
    with torch.no_grad():  # the cache still sees weight changes
        bilm.encoder.projection.bias.add_(1.0)
        reference.encoder.projection.bias.add_(1.0)
        torch.testing.assert_close(bilm(ids).layers, reference(ids).layers, atol=0, rtol=0)


@spacy.registry.readers("spacy-elmo-test.toy_examples.v1")
def toy_examples_reader():
    return lambda nlp: (Example(nlp.make_doc(d.text), d) for d in toy_docs(nlp, 8))


@pytest.mark.parametrize("annotating", [False, True])
def test_listeners_of_a_frozen_elmo_component(weights_dir, annotating):
    """With `elmo` in [training] frozen_components, spaCy skips its initialize, and the
    listener failed with an error that did not mention frozen_components. Now the biLM is
    loaded for it; training then needs `elmo` in annotating_components too, and says so
    when it is not."""
    config = Config().from_disk(CONFIGS / "ner_elmo.cfg")
    config["paths"]["elmo_weights"] = str(weights_dir)
    config["components"]["elmo"]["weights"] = str(weights_dir)
    config["training"]["frozen_components"] = ["elmo"]
    config["training"]["annotating_components"] = ["elmo"] if annotating else []
    config["corpora"] = {"train": {"@readers": "spacy-elmo-test.toy_examples.v1"},
                         "dev": {"@readers": "spacy-elmo-test.toy_examples.v1"}}
    nlp = init_nlp(config)
    listener = next(n for n in nlp.get_pipe("ner").model.walk() if isinstance(n, ElmoListener))
    assert listener.get_dim("nO") == 12
    examples = [Example(nlp.make_doc(d.text), d) for d in toy_docs(nlp, 8)]
    update = {"sgd": nlp.create_optimizer(), "exclude": ["elmo"],
              "annotates": ["elmo"] if annotating else []}
    if annotating:
        losses = nlp.update(examples, **update)
        assert losses["ner"] > 0
    else:
        with pytest.raises(ElmoError, match="frozen_components.*annotating_components"):
            nlp.update(examples, **update)


# A biLM of another width under a trained task -------------------------------------------

NARROW = BiLMOptions(lstm_dim=12, projection_dim=5, n_layers=2, char_embed_dim=4,
                     filters=((1, 4), (2, 4), (3, 8)), n_highway=1)  # output width 10


@pytest.fixture(scope="module")
def narrow_weights(tmp_path_factory):
    out = tmp_path_factory.mktemp("narrow_bilm")
    save_bilm(make_random_bilm(NARROW), out)
    return out


def _ner_pipeline(weights_dir, tok2vec):
    config = Config().from_disk(CONFIGS / "ner_elmo.cfg")
    config["components"]["elmo"]["weights"] = str(weights_dir)
    config["components"]["ner"]["model"]["tok2vec"].update(tok2vec)
    if tok2vec.get("@architectures") == "spacy-elmo.ElmoTok2Vec.v2":
        config["nlp"]["pipeline"] = ["ner"]
        config["components"]["ner"]["model"]["tok2vec"]["elmo"] = \
            config["components"].pop("elmo")["model"]
        del config["components"]["ner"]["model"]["tok2vec"]["upstream"]
        del config["components"]["ner"]["model"]["tok2vec"]["elmo_at_output"]  # v2 has none
    nlp = spacy.util.load_model_from_config(config, auto_fill=True)
    examples = [Example(nlp.make_doc(d.text), d) for d in toy_docs(nlp, 8)]
    nlp.initialize(lambda: examples)
    nlp.update(examples, sgd=nlp.create_optimizer())
    return nlp, examples


@pytest.mark.parametrize("width", [None, 96])
def test_a_biLM_of_another_width_under_a_trained_listener(weights_dir, narrow_weights,
                                                           tmp_path, width):
    """The ner's mix was trained on width 12; after the `elmo` component was given a biLM
    of width 10, predicting failed deep in the ner ("Shape mismatch for blis.gemm")."""
    nlp, examples = _ner_pipeline(weights_dir, {"width": width, "encode": None,
                                                "elmo_at_output": False}
                                  if width is None else {"width": width})
    nlp.to_disk(tmp_path / "p")
    loaded = spacy.load(tmp_path / "p")
    elmo = loaded.get_pipe("elmo")
    elmo.cfg["weights"] = str(narrow_weights)
    elmo.initialize(lambda: examples)
    assert elmo.model.get_dim("nO") == 10
    with pytest.raises(ElmoError, match=r"\[E054\] .* width 12, but the biLM now gives "
                                        r"width 10"):
        loaded("Alice went to Paris today .")
    with pytest.raises(ElmoError, match=r"\[E054\]"):  # and in training
        loaded.update(examples, sgd=loaded.create_optimizer())
    # with the biLM it was trained with, the task works again
    elmo.cfg["weights"] = str(weights_dir)
    elmo.initialize(lambda: examples)
    text = "Alice went to Paris today ."
    assert [e.text for e in loaded(text).ents] == [e.text for e in nlp(text).ents]


def test_a_private_biLM_of_another_width_under_a_trained_mix(weights_dir, narrow_weights):
    from spacy_elmo.bilm.io.sources import BilmSource
    from spacy_elmo.ml.elmo_model import load_weights

    nlp, examples = _ner_pipeline(
        weights_dir, {"@architectures": "spacy-elmo.ElmoTok2Vec.v2",
                      "weights": str(weights_dir)})
    private = next(n for n in nlp.get_pipe("ner").model.walk() if n.name == "elmo")
    load_weights(private, BilmSource(str(narrow_weights)))
    with pytest.raises(ElmoError, match=r"\[E054\] .* width 12, but the biLM now gives "
                                        r"width 10"):
        nlp("Alice went to Paris today .")


# A damaged saved pipeline ----------------------------------------------------------------

def _saved_elmo(weights_dir, path):
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo", config={"weights": str(weights_dir)})
    nlp.to_disk(path)
    return nlp


def test_a_truncated_elmo_model_file_is_named(weights_dir, tmp_path):
    """A truncated elmo/model gave "ValueError: Unpack failed: incomplete input"."""
    _saved_elmo(weights_dir, tmp_path / "p")
    model = tmp_path / "p" / "elmo" / "model"
    data = model.read_bytes()
    model.write_bytes(data[: len(data) // 2])
    with pytest.raises(ElmoError, match=r"\[E002\] Could not read '.*elmo.model' as .*"
                                        r"incomplete input"):
        spacy.load(tmp_path / "p")
    fresh = spacy.blank("en")
    fresh.add_pipe("elmo", config={"weights": str(weights_dir)})
    with pytest.raises(ElmoError, match=r"\[E002\] Could not read 'the `elmo` component's "
                                        r"serialized bytes'"):
        fresh.get_pipe("elmo").from_bytes(data[: len(data) // 2])


def _flip_a_tensor_byte(data: bytes, bilm) -> bytes:
    """`data` with the low bit of the first float of the biLM's projection weights flipped:
    a damage that torch.load and thinc do not notice."""
    tensor = bilm.encoder.projection.weight.detach().contiguous().numpy().tobytes()
    at = data.index(tensor[:64])
    assert data.find(tensor[:64], at + 1) == -1
    damaged = bytearray(data)
    damaged[at] ^= 0x01
    return bytes(damaged)


@pytest.mark.parametrize("dim,value", [("nL", 2), ("nL", -4), ("nO", 64)])
def test_saved_dims_that_are_not_the_biLMs_are_damage(weights_dir, tmp_path, dim, value):
    """A flipped byte in the model's recorded dims loaded silently, then every doc failed
    with a shape error (a server reported healthy and answered 500 to every parse)."""
    _saved_elmo(weights_dir, tmp_path / "p")
    path = tmp_path / "p" / "elmo" / "model"
    data = srsly.msgpack_loads(path.read_bytes())
    data["nodes"][0]["dims"][dim] = value
    path.write_bytes(srsly.msgpack_dumps(data))
    with pytest.raises(ElmoError, match=r"\[E002\] Could not read '.*elmo.model' as the "
                                        r"`elmo` component's biLM: its recorded output shape"):
        spacy.load(tmp_path / "p")


def test_a_flipped_byte_in_the_saved_tensors_is_found(weights_dir, tmp_path):
    """The damaged weights loaded silently, giving slightly different vectors."""
    nlp = _saved_elmo(weights_dir, tmp_path / "p")
    bilm = get_holder(nlp.get_pipe("elmo").model).bilm
    model = tmp_path / "p" / "elmo" / "model"
    model.write_bytes(_flip_a_tensor_byte(model.read_bytes(), bilm))
    with pytest.raises(ElmoError, match=r"\[E002\] Could not read '.*elmo.model' as the "
                                        r"`elmo` component's biLM: .*checksum"):
        spacy.load(tmp_path / "p")
    fresh = spacy.blank("en")
    fresh.add_pipe("elmo", config={"weights": str(weights_dir)})
    with pytest.raises(ElmoError, match=r"\[E002\] Could not read 'the `elmo` component's "
                                        r"serialized bytes' .*checksum"):
        fresh.get_pipe("elmo").from_bytes(
            _flip_a_tensor_byte(nlp.get_pipe("elmo").to_bytes(), bilm))


def _without_checksum(data: bytes) -> bytes:
    """An `elmo` component's model bytes as spacy-elmo wrote them before 1.0: the biLM
    without its `state_sha256`."""
    model = srsly.msgpack_loads(data)
    (shim_index, shim), = [(i, s[0]) for i, s in enumerate(model["shims"]) if s]
    shim = srsly.msgpack_loads(shim)
    holder = srsly.msgpack_loads(shim["state"])
    del holder[CHECKSUM]
    shim["state"] = srsly.msgpack_dumps(holder)
    model["shims"][shim_index] = [srsly.msgpack_dumps(shim)]
    return srsly.msgpack_dumps(model)


def test_a_biLM_saved_without_its_checksum_is_refused(weights_dir, tmp_path):
    """Such pipelines (spacy-elmo before 1.0) loaded unchecked."""
    nlp = _saved_elmo(weights_dir, tmp_path / "p")
    model = tmp_path / "p" / "elmo" / "model"
    model.write_bytes(_without_checksum(model.read_bytes()))
    with pytest.raises(ElmoError, match=r"\[E260\] '.*elmo.model' holds a biLM saved without "
                                        r"a checksum .* Build the pipeline again"):
        spacy.load(tmp_path / "p")
    fresh = spacy.blank("en")
    fresh.add_pipe("elmo", config={"weights": str(weights_dir)})
    with pytest.raises(ElmoError, match=r"\[E260\] 'the `elmo` component's serialized "
                                        r"bytes' holds a biLM saved without a checksum"):
        component = srsly.msgpack_loads(nlp.get_pipe("elmo").to_bytes())
        component["model"] = _without_checksum(component["model"])
        fresh.get_pipe("elmo").from_bytes(srsly.msgpack_dumps(component))


def test_a_damaged_elmo_cfg_is_named(weights_dir, tmp_path):
    _saved_elmo(weights_dir, tmp_path / "p")
    (tmp_path / "p" / "elmo" / "cfg").write_text('{"weights": ')
    with pytest.raises(ElmoError, match=r"\[E002\] Could not read '.*elmo.cfg' as the "
                                        r"`elmo` component's settings"):
        spacy.load(tmp_path / "p")


def test_a_damaged_private_biLM_is_a_catalogue_error(weights_dir, tmp_path):
    """A private biLM (ElmoTok2Vec) is read by its task's component, which cannot name its
    file, but the damage is still found and reported."""
    nlp, _ = _ner_pipeline(weights_dir, {"@architectures": "spacy-elmo.ElmoTok2Vec.v2",
                                         "weights": str(weights_dir)})
    nlp.to_disk(tmp_path / "p")
    private = next(n for n in nlp.get_pipe("ner").model.walk() if n.name == "elmo")
    model = tmp_path / "p" / "ner" / "model"
    model.write_bytes(_flip_a_tensor_byte(model.read_bytes(),
                                          get_holder(private).bilm))
    with pytest.raises(ElmoError, match=r"\[E002\] .* ELMo biLM weights: .*checksum"):
        spacy.load(tmp_path / "p")


def test_a_loaded_pipeline_takes_its_settings_from_the_config(weights_dir, tmp_path):
    """spacy.load(..., config=...) changes how the saved biLM runs (a training config's
    output cache can be turned off to serve); other weights cannot replace the saved biLM,
    and a warning says so."""
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo", config={"weights": str(weights_dir), "set_vector_hooks": False,
                                 "model": {"@architectures": "spacy-elmo.ElmoModel.v1",
                                           "output_cache_mb": 64, "batch_size": 8}})
    expected = nlp(TEXT)._.elmo
    nlp.to_disk(tmp_path / "pipeline")
    loaded = spacy.load(tmp_path / "pipeline")  # as saved
    elmo = loaded.get_pipe("elmo")
    assert elmo.model.attrs["output_cache"].max_bytes == 64 * 2**20
    assert settings_of(elmo.model).batch_size == 8 and not elmo.cfg["set_vector_hooks"]
    overrides = {"components": {"elmo": {"store_layers": True, "set_vector_hooks": True,
                                         "gamma": 2.0,
                                         "model": {"output_cache_mb": 0, "batch_size": 2}}}}
    loaded = spacy.load(tmp_path / "pipeline", config=overrides)
    elmo = loaded.get_pipe("elmo")
    assert elmo.model.attrs["output_cache"].max_bytes == 0
    assert settings_of(elmo.model).batch_size == 2
    doc = loaded(TEXT)
    np.testing.assert_allclose(doc._.elmo, 2.0 * expected, atol=1e-5)
    assert doc._.elmo_layers is not None and doc.has_vector
    assert len(elmo.model.attrs["output_cache"]) == 0
    other = tmp_path / "other_weights"
    save_bilm(make_random_bilm(seed=1), other)
    with pytest.warns(UserWarning, match=r"\[W006\] \[components.elmo\] weights is "
                                         rf"'{other}', but the pipeline being loaded was "
                                         rf"saved with '{weights_dir}'"):
        loaded = spacy.load(tmp_path / "pipeline",
                            config={"components": {"elmo": {"weights": str(other)}}})
    np.testing.assert_allclose(loaded(TEXT)._.elmo, expected, atol=1e-6)


def test_a_loaded_private_biLM_takes_its_settings_from_the_config(weights_dir, tmp_path):
    """A task's private biLM (ElmoTok2Vec) kept the saved output cache, precision and
    batch size whatever the loading config said: thinc's from_bytes wrote them back."""
    nlp, _ = _ner_pipeline(weights_dir, {"@architectures": "spacy-elmo.ElmoTok2Vec.v2",
                                         "weights": str(weights_dir)})
    text = "Alice went to Paris today ."
    expected = [e.text for e in nlp(text).ents]
    nlp.to_disk(tmp_path / "p")

    def private(pipeline):
        return next(n for n in pipeline.get_pipe("ner").model.walk() if n.name == "elmo")

    saved = private(spacy.load(tmp_path / "p"))
    assert saved.attrs["output_cache"].max_bytes > 0 and settings_of(saved).batch_size != 3
    overrides = {"components": {"ner": {"model": {"tok2vec": {"elmo": {
        "output_cache_mb": 0, "batch_size": 3, "precision": "int8"}}}}}}
    loaded = spacy.load(tmp_path / "p", config=overrides)
    model = private(loaded)
    assert model.attrs["output_cache"].max_bytes == 0
    assert (settings_of(model).batch_size, settings_of(model).precision) == (3, "int8")
    # applied once, at load: the biLM runs at the setting before any call
    assert get_holder(model).bilm.precision == "int8"
    loaded(text)
    assert get_holder(model).bilm.precision == "int8"
    as_saved = spacy.load(tmp_path / "p")  # without overrides: the saved settings, same output
    assert [e.text for e in as_saved(text).ents] == expected
    # the settings are never saved: the config holds them
    assert private(nlp).to_dict()["attrs"][0] == {}


# pipelines of spacy-elmo 0.1: the 1.0 fixture's, rewritten as 0.1 saved them ------------
V1_0_PIPELINE = Path(__file__).resolve().parents[1] / "fixtures" / "v1_0" / "pipeline"


def test_the_private_tok2vec_of_0_1_is_named(tmp_path, monkeypatch):
    """0.1 saved a textcat on `spacy-elmo.ElmoTok2Vec.v1` (gone in 1.0): spaCy's registry
    error (E893) names it and lists its successor."""
    monkeypatch.chdir(tmp_path)
    saved = Path(shutil.copytree(V1_0_PIPELINE, tmp_path / "p"))
    config = (saved / "config.cfg").read_text(encoding="utf-8")
    assert config.count('"spacy-elmo.ElmoTok2Vec.v2"') == 1
    (saved / "config.cfg").write_text(config.replace("ElmoTok2Vec.v2", "ElmoTok2Vec.v1"),
                                      encoding="utf-8")
    with pytest.raises(RegistryError, match=r"(?s)\[E893\] .*'spacy-elmo\.ElmoTok2Vec\.v1'.*"
                                            r"spacy-elmo\.ElmoTok2Vec\.v2"):
        spacy.load(saved)


def test_a_listener_s_mix_saved_without_its_width_is_refused(tmp_path, monkeypatch):
    """0.1 saved a task's layer mix without the width of the ELMo vectors: the NER of such a
    pipeline is refused when it runs (E261), not run on a biLM it cannot check."""
    monkeypatch.chdir(tmp_path)
    saved = Path(shutil.copytree(V1_0_PIPELINE, tmp_path / "p"))
    model = srsly.msgpack_loads((saved / "ner" / "model").read_bytes())
    mix, = [node for node in model["nodes"] if node["name"] == "elmo-scalar-mix"]
    assert mix["dims"]["nI"] == 12
    mix["dims"]["nI"] = None
    (saved / "ner" / "model").write_bytes(srsly.msgpack_dumps(model))
    nlp = spacy.load(saved, exclude=["textcat", "spancat"])
    with pytest.raises(ElmoError, match=r"\[E261\] .* saved by spacy-elmo before 1\.0"):
        nlp("Alice went to Paris today .")


def test_initialize_on_a_loaded_pipeline_reloads_the_configured_weights(tmp_path):
    """spaCy's rule, as docs/component.md says: nlp.initialize() starts the `elmo`
    component afresh from its `weights` setting, so the saved biLM is replaced, and a
    `weights` path missing on this machine is E001 (nothing of the pipeline is lost)."""
    weights = tmp_path / "weights"
    save_bilm(make_random_bilm(seed=1), weights)
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo", config={"weights": str(weights)})
    nlp.initialize()
    saved = nlp(TEXT)._.elmo
    nlp.to_disk(tmp_path / "pipeline")
    save_bilm(make_random_bilm(seed=2), weights)
    loaded = spacy.load(tmp_path / "pipeline")
    np.testing.assert_allclose(loaded(TEXT)._.elmo, saved, atol=1e-6)  # the saved biLM
    loaded.initialize()
    assert not np.allclose(loaded(TEXT)._.elmo, saved, atol=1e-3)  # the configured one
    shutil.rmtree(weights)
    again = spacy.load(tmp_path / "pipeline")
    with pytest.raises(ElmoError, match="E001"):
        again.initialize()
    np.testing.assert_allclose(again(TEXT)._.elmo, saved, atol=1e-6)
