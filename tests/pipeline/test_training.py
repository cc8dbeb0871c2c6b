"""Listeners, training with `spacy train`, caching, serialization and packaging."""

import pickle
import re
import shutil

import numpy as np
import pytest
import spacy
import srsly
import torch
from spacy.cli.train import train
from spacy.tokens import DocBin
from spacy.training import Example
from spacy_elmo_lab.tiny import toy_docs
from thinc.api import Adam, Config

from spacy_elmo.errors import ElmoError
from spacy_elmo.ml.elmo_model import get_holder
from spacy_elmo.ml.scalar_mix import scalar_mixes
from spacy_elmo.pipeline import ElmoListener

from .conftest import CONFIGS


def _train_nlp(weights_dir, config_name="ner_textcat_elmo.cfg", overrides=None):
    """A pipeline from a shipped config, initialized on toy data. An override of None for a
    section (a dict) removes it."""
    config = Config().from_disk(CONFIGS / config_name)
    config["components"]["elmo"]["weights"] = str(weights_dir)
    for path, value in (overrides or {}).items():
        section, key = path.rsplit(".", 1)
        node = config
        for part in section.split("."):
            node = node[part]
        if value is None and isinstance(node.get(key), dict):
            del node[key]
        else:
            node[key] = value
    nlp = spacy.util.load_model_from_config(config, auto_fill=True)
    examples = [Example(nlp.make_doc(d.text), d) for d in toy_docs(nlp, 16)]
    nlp.initialize(lambda: examples)
    return nlp, examples


def _mix_of(nlp, component):
    (mix,) = scalar_mixes(nlp.get_pipe(component).model)
    return mix


def test_listeners_learn_their_own_mix_and_biLM_stays_frozen(weights_dir):
    nlp, examples = _train_nlp(weights_dir)
    elmo = nlp.get_pipe("elmo")
    assert sorted(elmo.listening_components) == ["ner", "textcat"]
    bilm = get_holder(elmo.model).bilm
    before = {k: v.clone() for k, v in bilm.state_dict().items()}
    optimizer = nlp.create_optimizer()
    losses = {}
    for _ in range(12):
        nlp.update(examples, sgd=optimizer, losses=losses)
    w_ner = _mix_of(nlp, "ner").get_param("w")
    w_cat = _mix_of(nlp, "textcat").get_param("w")
    assert np.abs(w_ner).sum() > 0 and np.abs(w_cat).sum() > 0
    assert not np.allclose(w_ner, w_cat)
    for k, v in bilm.state_dict().items():
        assert (v == before[k]).all(), k
    cache = elmo.model.attrs["output_cache"]
    assert cache.hits > 0 and len(cache) > 0


def test_grad_factor_fine_tunes_the_bilm(weights_dir):
    nlp, examples = _train_nlp(
        weights_dir, "ner_elmo.cfg",
        {"components.ner.model.tok2vec.grad_factor": 1.0})
    bilm = get_holder(nlp.get_pipe("elmo").model).bilm
    before = bilm.encoder.projection.weight.detach().clone()
    text = "Alice went to Paris today ."
    vectors_before = nlp(text)._.elmo  # fills the output cache
    optimizer = Adam(0.001, L2=0.0)  # no weight decay: only the task's gradients move it
    for _ in range(3):
        nlp.update(examples, sgd=optimizer)
    assert not np.allclose(before.numpy(), bilm.encoder.projection.weight.detach().numpy())
    # the cache must not serve outputs of the old weights
    vectors_after = nlp(text)._.elmo
    assert not np.allclose(vectors_before, vectors_after)
    fresh = nlp.get_pipe("elmo")
    fresh.model.attrs["output_cache"].clear()
    np.testing.assert_allclose(nlp(text)._.elmo, vectors_after, atol=1e-6)


def test_both_tasks_learn_from_frozen_elmo_features(weights_dir):
    spacy.util.fix_random_seed(0)
    nlp, examples = _train_nlp(weights_dir)
    optimizer = nlp.create_optimizer()
    for _ in range(40):
        nlp.update(examples, sgd=optimizer)
    held_out = [Example(nlp.make_doc(d.text), d) for d in toy_docs(nlp, 16, seed=7)]
    scores = nlp.evaluate(held_out)
    assert scores["ents_f"] > 0.9
    assert scores["cats_micro_f"] > 0.9


def test_encode_and_elmo_at_output_need_a_width(weights_dir):
    """E057 names what needs the width; without both the mixed vectors go as they are."""
    tok2vec = "components.ner.model.tok2vec"
    with pytest.raises(ElmoError, match=r"\[E057\] .*`encode` is set, but `width`"):
        _train_nlp(weights_dir, "ner_elmo.cfg", {f"{tok2vec}.width": None})
    with pytest.raises(ElmoError, match=r"\[E057\] .*`elmo_at_output` is true, but `width`"):
        _train_nlp(weights_dir, "ner_elmo.cfg", {f"{tok2vec}.width": None,
                                                 f"{tok2vec}.encode": None})
    nlp, _ = _train_nlp(weights_dir, "ner_elmo.cfg", {
        f"{tok2vec}.width": None, f"{tok2vec}.encode": None, f"{tok2vec}.elmo_at_output": False})
    listener = next(n for n in nlp.get_pipe("ner").model.walk() if n.name == "elmo-tok2vec")
    assert listener.get_dim("nO") == nlp.get_pipe("elmo").model.get_dim("nO")


@pytest.mark.parametrize("factors", [(1.0, 0.0), (0.0, 1.0), (1.0, 1.0)])
def test_any_listener_with_a_grad_factor_fine_tunes(weights_dir, factors):
    nlp, examples = _train_nlp(weights_dir, overrides={
        "components.ner.model.tok2vec.grad_factor": factors[0],
        "components.textcat.model.tok2vec.grad_factor": factors[1]})
    bilm = get_holder(nlp.get_pipe("elmo").model).bilm
    before = {k: v.clone() for k, v in bilm.state_dict().items()}
    optimizer = Adam(0.001, L2=0.0)  # no weight decay: only the task's gradients move it
    # the first update sends no gradient back (the tasks' output layers start at zero)
    for _ in range(2):
        nlp.update(examples, sgd=optimizer)
    # the task's gradients reached every parameter; nlp.update calls the `elmo`
    # component's finish_update before the tasks update, so the next update applies them
    for name, param in bilm.named_parameters():
        assert param.grad is not None and param.grad.abs().sum() > 0, name
    nlp.update(examples, sgd=optimizer)
    changed = [k for k, v in bilm.state_dict().items() if not torch.equal(v, before[k])]
    assert len(changed) == len(before)


def _bilm_state(nlp):
    bilm = get_holder(nlp.get_pipe("elmo").model).bilm
    return {k: v.clone() for k, v in bilm.state_dict().items()}


def _changed(nlp, before):
    return [k for k, v in _bilm_state(nlp).items() if not torch.equal(v, before[k])]


def test_fine_tuning_gradients_count_when_a_listening_task_sits_out(weights_dir):
    """NER left out of the updates (or with no entities in a batch) never reports: the
    textcat's gradients still reach the biLM."""
    nlp, examples = _train_nlp(weights_dir, overrides={
        "components.ner.model.tok2vec.grad_factor": 1.0,
        "components.textcat.model.tok2vec.grad_factor": 1.0})
    before = _bilm_state(nlp)
    optimizer = Adam(0.001, L2=0.0)  # no weight decay: only gradients move the biLM
    for _ in range(4):
        nlp.update(examples, sgd=optimizer, exclude=["ner"])
    assert len(_changed(nlp, before)) == len(before)


def test_spacy_trains_loop_applies_fine_tuning_gradients_at_once(weights_dir):
    """`spacy train` updates every component (sgd=False), then calls finish_update."""
    nlp, examples = _train_nlp(weights_dir, "ner_elmo.cfg",
                               {"components.ner.model.tok2vec.grad_factor": 1.0})
    optimizer = Adam(0.001, L2=0.0)
    nlp.update(examples, sgd=optimizer)  # NER's output layer leaves zero: now it learns
    before = _bilm_state(nlp)
    nlp.update(examples, sgd=False)
    for _, proc in nlp.pipeline:
        proc.finish_update(optimizer)
    assert len(_changed(nlp, before)) == len(before)


def test_a_biLM_frozen_after_fine_tuning_stays_as_it_is(weights_dir):
    nlp, examples = _train_nlp(weights_dir, "ner_elmo.cfg",
                               {"components.ner.model.tok2vec.grad_factor": 1.0})
    optimizer = Adam(0.001, L2=0.01)  # weight decay would move it if the optimizer ran
    for _ in range(3):
        nlp.update(examples, sgd=optimizer)
    elmo = nlp.get_pipe("elmo")
    for listener in elmo.listeners:
        listener.attrs["grad_factor"] = 0.0
    nlp.update(examples, sgd=optimizer)  # applies the last fine-tuning gradients
    before = _bilm_state(nlp)
    nlp.update(examples, sgd=optimizer)  # its run notices that step: the caches start anew
    version = get_holder(elmo.model).bilm.version.key()
    for _ in range(2):
        nlp.update(examples, sgd=optimizer)
    assert _changed(nlp, before) == []
    assert get_holder(elmo.model).bilm.version.key() == version  # caches kept


def test_a_listener_takes_its_layers_once(weights_dir):
    """An update that leaves out the `elmo` component cannot train on the layers of an
    earlier update (whose backward pass has run)."""
    nlp, examples = _train_nlp(weights_dir, "ner_elmo.cfg",
                               {"components.ner.model.tok2vec.grad_factor": 1.0})
    optimizer = Adam(0.001, L2=0.0)
    nlp.update(examples, sgd=optimizer)
    with pytest.raises(ElmoError, match=r"\[E056\]"):
        nlp.update(examples, sgd=optimizer, exclude=["elmo"])


def _ner_features(nlp, doc):
    """What the NER's tok2vec gives for one doc (not an all-zero array)."""
    features = nlp.get_pipe("ner").model.get_ref("tok2vec").predict([doc])[0]
    assert np.abs(features).max() > 0
    return features


def test_replace_listeners_makes_a_private_biLM_that_saves_and_loads(weights_dir, tmp_path):
    nlp, examples = _train_nlp(weights_dir, "ner_elmo.cfg")
    nlp.update(examples, sgd=nlp.create_optimizer())
    text = "Alice went to Paris today ."
    expected = [(e.text, e.label_) for e in nlp(text).ents]
    # the NER's input features: the listener's output over the elmo component's layers
    features = _ner_features(nlp, nlp(text))
    nlp.replace_listeners("elmo", "ner", ["model.tok2vec"])
    assert nlp.get_pipe("elmo").listening_components == []
    cfg = nlp.config["components"]["ner"]["model"]["tok2vec"]
    # the config's ElmoListener.v2 becomes ElmoTok2Vec.v3, which keeps its elmo_at_output
    # (true in the shipped NER config since 1.1) and its encoder
    assert cfg["@architectures"] == "spacy-elmo.ElmoTok2Vec.v3" and cfg["grad_factor"] == 0.0
    assert cfg["elmo_at_output"] is True and cfg["encode"]["kind"] == "bilstm"
    assert cfg["elmo"] == nlp.config["components"]["elmo"]["model"]
    # trained again from its config, the private biLM loads the same weights
    assert cfg["weights"] == str(weights_dir)
    nlp.remove_pipe("elmo")
    # the private copy computes the same features from the text alone, and keeps them saved
    np.testing.assert_allclose(_ner_features(nlp, nlp.make_doc(text)), features, atol=1e-5)
    assert [(e.text, e.label_) for e in nlp(text).ents] == expected
    nlp.to_disk(tmp_path / "p")
    loaded = spacy.load(tmp_path / "p")
    np.testing.assert_allclose(_ner_features(loaded, loaded.make_doc(text)), features, atol=1e-5)
    assert [(e.text, e.label_) for e in loaded(text).ents] == expected


def test_listener_warns_when_docs_have_no_layers(weights_dir):
    nlp, examples = _train_nlp(weights_dir, "ner_elmo.cfg")
    nlp.update(examples, sgd=nlp.create_optimizer())
    with nlp.select_pipes(disable=["elmo"]):
        with pytest.warns(UserWarning, match="used zero vectors"):
            nlp("Alice went to Paris today .")


@pytest.mark.parametrize("width", [None, 96])
def test_features_are_concatenated(weights_dir, width):
    overrides = {"components.ner.model.tok2vec.width": width}
    if width is None:
        overrides["components.ner.model.tok2vec.encode"] = None
    nlp, examples = _train_nlp(weights_dir, "ner_elmo_concat.cfg", overrides)
    tok2vec = next(n for n in nlp.get_pipe("ner").model.walk() if n.name == "elmo-tok2vec")
    docs = [eg.predicted for eg in examples[:2]]
    nlp.get_pipe("elmo").set_annotations(docs, nlp.get_pipe("elmo").predict(docs))
    outputs = tok2vec.predict(docs)
    expected = 96 + 12 if width is None else width
    assert outputs[0].shape == (len(docs[0]), expected)
    assert tok2vec.get_dim("nO") == expected


@pytest.mark.parametrize("upstream,which", [("bilm", "no component named 'bilm'"),
                                             ("*", "no `elmo` component")])
def test_a_listener_names_the_upstream_it_did_not_find(weights_dir, upstream, which):
    config = Config().from_disk(CONFIGS / "ner_elmo.cfg")
    config["components"]["elmo"]["weights"] = str(weights_dir)
    config["components"]["ner"]["model"]["tok2vec"]["upstream"] = upstream
    config["nlp"]["pipeline"] = ["ner", "elmo"]  # the listener comes first
    nlp = spacy.util.load_model_from_config(config, auto_fill=True)
    examples = [Example(nlp.make_doc(d.text), d) for d in toy_docs(nlp, 4)]
    with pytest.raises(ElmoError, match=rf"\[E053\] ELMo listener \(upstream = "
                                        rf"'{re.escape(upstream)}'\).* {which} before"):
        nlp.initialize(lambda: examples)


def test_the_biLM_does_not_run_in_training_when_nothing_listens(weights_dir):
    nlp, examples = _train_nlp(weights_dir, "ner_elmo.cfg")
    nlp.replace_listeners("elmo", "ner", ["model.tok2vec"])
    elmo = nlp.get_pipe("elmo")
    cache = elmo.model.attrs["output_cache"]
    cache.clear()
    elmo.update(examples)
    assert elmo.listeners == [] and cache.misses == 0 and len(cache) == 0


def test_listener_without_upstream_is_a_clear_error():
    config = Config().from_disk(CONFIGS / "ner_elmo.cfg")
    config["nlp"]["pipeline"] = ["ner"]
    del config["components"]["elmo"]
    nlp = spacy.util.load_model_from_config(config, auto_fill=True)
    examples = [Example(nlp.make_doc(d.text), d) for d in toy_docs(nlp, 4)]
    with pytest.raises(ElmoError, match="upstream ELMo width is not known"):
        nlp.initialize(lambda: examples)


def test_pickle_after_update_and_roundtrips(weights_dir, tmp_path):
    nlp, examples = _train_nlp(weights_dir)
    nlp.update(examples, sgd=nlp.create_optimizer())
    nlp.get_pipe("elmo").update(examples)  # the listeners now hold a batch and its closure
    listener = next(n for n in nlp.get_pipe("ner").model.walk() if isinstance(n, ElmoListener))
    assert listener._transient.backprop is not None
    text = "Alice went to Paris today ."
    expected = nlp(text)
    restored = pickle.loads(pickle.dumps(nlp))
    for other in (restored, spacy.blank("en").from_config(nlp.config).from_bytes(
            nlp.to_bytes())):
        doc = other(text)
        np.testing.assert_allclose(doc._.elmo, expected._.elmo, atol=1e-6)
        assert doc.cats == pytest.approx(expected.cats, abs=1e-5)
        assert [(e.text, e.label_) for e in doc.ents] == \
            [(e.text, e.label_) for e in expected.ents]
    nlp.to_disk(tmp_path / "pipeline")
    moved = tmp_path / "moved_weights"
    shutil.move(str(weights_dir), moved)  # the saved pipeline must not need them
    try:
        loaded = spacy.load(tmp_path / "pipeline")
        doc = loaded(text)
        np.testing.assert_allclose(doc._.elmo, expected._.elmo, atol=1e-6)
        assert doc.cats == pytest.approx(expected.cats, abs=1e-5)
    finally:
        shutil.move(str(moved), weights_dir)


def test_private_tok2vec(weights_dir, tmp_path):
    config = Config().from_disk(CONFIGS / "ner_elmo.cfg")
    config["nlp"]["pipeline"] = ["ner"]
    elmo = config["components"].pop("elmo")["model"]
    config["components"]["ner"]["model"]["tok2vec"] = {
        "@architectures": "spacy-elmo.ElmoTok2Vec.v2", "weights": str(weights_dir),
        "elmo": elmo}
    nlp = spacy.util.load_model_from_config(config, auto_fill=True)
    examples = [Example(nlp.make_doc(d.text), d) for d in toy_docs(nlp, 8)]
    nlp.initialize(lambda: examples)
    nlp.update(examples, sgd=nlp.create_optimizer())
    nlp.to_disk(tmp_path / "p")
    loaded = spacy.load(tmp_path / "p")
    text = "Bob went to Rome today ."
    np.testing.assert_allclose(_ner_features(loaded, loaded.make_doc(text)),
                               _ner_features(nlp, nlp.make_doc(text)), atol=1e-6)
    assert [e.text for e in loaded(text).ents] == [e.text for e in nlp(text).ents]


@pytest.mark.parametrize("config_name", ["ner_textcat_elmo.cfg", "textcat_multilabel_elmo.cfg",
                                         "ner_cnn.cfg", "textcat_cnn.cfg"])
def test_spacy_train_runs(config_name, weights_dir, toy_corpus, tmp_path):
    overrides = {"paths.train": str(toy_corpus / "train.spacy"),
                 "paths.dev": str(toy_corpus / "dev.spacy"),
                 "training.max_steps": 6, "training.eval_frequency": 3}
    if "elmo" in config_name:
        overrides["paths.elmo_weights"] = str(weights_dir)
    train(CONFIGS / config_name, tmp_path / "out", overrides=overrides)
    meta = srsly.read_json(tmp_path / "out" / "model-best" / "meta.json")
    nlp = spacy.load(tmp_path / "out" / "model-best")
    doc = nlp("Alice went to London today .")
    if "ner" in nlp.pipe_names:
        assert "ents_f" in meta["performance"]
        assert set(nlp.get_pipe("ner").labels) == {"PER", "LOC"}
        assert all(e.label_ in ("PER", "LOC") for e in doc.ents)
    if any(name.startswith("textcat") for name in nlp.pipe_names):
        assert "cats_score" in meta["performance"]
        assert set(doc.cats) == {"SOUTH", "NORTH"}
        assert all(0.0 <= v <= 1.0 for v in doc.cats.values())


@pytest.mark.parametrize("config_name,lang", [
    ("ner_cnn.cfg", "en"), ("textcat_cnn.cfg", "en"), ("ner_cnn.cfg", "zh"),
    ("textcat_cnn.cfg", "zh")])
def test_cnn_baselines_load_spacy_pretrain_weights(config_name, lang, tmp_path):
    """--paths.init_tok2vec must reach the tok2vec (spaCy ignores it silently when the
    training config has no [pretraining] section)."""
    from spacy.training.initialize import init_nlp
    from spacy.util import load_config

    nlp = spacy.blank(lang)
    DocBin(docs=toy_docs(nlp, 4)).to_disk(tmp_path / "train.spacy")
    base = load_config(CONFIGS / config_name).merge({"paths": {
        "train": str(tmp_path / "train.spacy"), "dev": str(tmp_path / "train.spacy")},
        "nlp": {"lang": lang}})  # --nlp.lang zh: the Chinese rows
    fresh = init_nlp(base)
    tok2vec = fresh.get_pipe("tok2vec").model
    for node in tok2vec.walk():  # weights no fresh initialisation would give
        for name in node.param_names:
            if node.has_param(name):
                node.set_param(name, node.ops.xp.full_like(node.get_param(name), 0.25))
    (tmp_path / "t2v.bin").write_bytes(tok2vec.to_bytes())
    loaded = init_nlp(base.merge({"paths": {"init_tok2vec": str(tmp_path / "t2v.bin")}}))
    params = [node.get_param(name) for node in loaded.get_pipe("tok2vec").model.walk()
              for name in node.param_names if node.has_param(name)]
    assert params and all(np.all(p == 0.25) for p in params)
