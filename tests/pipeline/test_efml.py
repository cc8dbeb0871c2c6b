"""An ELMoForManyLangs model in spaCy: EFML's vectors, listeners, `spacy train`, saving."""

import json
import shutil

import numpy as np
import pytest
import spacy
import torch
from spacy.cli.train import train
from spacy.tokens import Doc
from thinc.api import Adam

from spacy_elmo.bilm import load_bilm
from spacy_elmo.errors import ElmoError
from spacy_elmo.ml.elmo_model import get_holder

from ..bilm.test_efml import ATOL, EFML_DIR, reference
from .conftest import CONFIGS
from .test_training import _train_nlp

TEXT = "我爱北京天安门。"


@pytest.fixture
def efml_copy(tmp_path):
    """A copy of the fixture model that a test may delete."""
    return shutil.copytree(EFML_DIR / "model", tmp_path / "efml_model")


def test_component_gives_efml_vectors_and_saves_without_the_model(efml_copy, tmp_path):
    sentences = json.loads((EFML_DIR / "sentences.json").read_text(encoding="utf-8"))
    expected = reference("outputs_all_fresh.hdf5")
    nlp = spacy.blank("zh")
    nlp.add_pipe("elmo", config={"weights": str(efml_copy), "store_layers": True})
    with pytest.warns(UserWarning, match="budget of 8 characters"):  # Internationalization
        docs = list(nlp.pipe([Doc(nlp.vocab, words=s) for s in sentences], batch_size=5))
    for doc, words, layers in zip(docs, sentences, expected, strict=True):
        spaces = [i for i, w in enumerate(words) if w.isspace()]
        if spaces:  # spaCy's whitespace tokens stay out of the biLM, as for any model
            assert not doc._.elmo_layers[:, spaces].any()
            continue
        assert np.abs(doc._.elmo_layers - layers).max() < ATOL
        assert np.abs(doc._.elmo - layers.mean(0)).max() < ATOL
    before = nlp(TEXT)._.elmo
    assert before.shape == (len(nlp.make_doc(TEXT)), 16)
    nlp.to_disk(tmp_path / "pipeline")
    shutil.rmtree(efml_copy)  # the saved pipeline carries dictionaries and weights
    loaded = spacy.load(tmp_path / "pipeline")
    np.testing.assert_allclose(loaded(TEXT)._.elmo, before, atol=1e-6)
    restored = spacy.blank("zh").from_config(nlp.config).from_bytes(nlp.to_bytes())
    np.testing.assert_allclose(restored(TEXT)._.elmo, before, atol=1e-6)


def test_weights_format_named(efml_copy):
    nlp = spacy.blank("zh")
    nlp.add_pipe("elmo", config={"weights": str(efml_copy), "weights_format": "efml"})
    nlp.initialize()
    assert nlp(TEXT)._.elmo.shape[1] == 16
    wrong = spacy.blank("zh")
    wrong.add_pipe("elmo", config={"weights": str(efml_copy), "weights_format": "allennlp"})
    with pytest.raises(ElmoError, match="holds no 'weights.hdf5'"):
        wrong.initialize()
    with pytest.raises(ElmoError, match="Unknown value 'hdf5' for weights_format"):
        spacy.blank("zh").add_pipe("elmo", config={"weights": str(efml_copy),
                                                   "weights_format": "hdf5"})


def test_listeners_fine_tune_an_efml_model(efml_copy):
    nlp, examples = _train_nlp(efml_copy, "ner_elmo.cfg",
                               {"components.ner.model.tok2vec.grad_factor": 1.0})
    bilm = get_holder(nlp.get_pipe("elmo").model).bilm
    assert bilm.dictionary is not None
    words = bilm.encoder.word_embedding.weight.detach().clone()
    optimizer = Adam(0.001, L2=0.0)  # no weight decay: only the task's gradients move it
    # the first update sends no gradient back (NER's output layer starts at zero); the
    # third applies the second one's gradients
    for _ in range(3):
        nlp.update(examples, sgd=optimizer)
    assert not torch.equal(words, bilm.encoder.word_embedding.weight.detach())


def test_spacy_train_with_an_efml_model(efml_copy, toy_corpus, tmp_path):
    overrides = {"paths.train": str(toy_corpus / "train.spacy"),
                 "paths.dev": str(toy_corpus / "dev.spacy"),
                 "paths.elmo_weights": str(efml_copy),
                 "training.max_steps": 6, "training.eval_frequency": 3}
    train(CONFIGS / "ner_elmo.cfg", tmp_path / "out", overrides=overrides)
    shutil.rmtree(efml_copy)
    nlp = spacy.load(tmp_path / "out" / "model-best")
    words = "Alice went to 北京 today .".split()
    doc = nlp(Doc(nlp.vocab, words=words))
    bilm = load_bilm(EFML_DIR / "model_zip")
    with torch.inference_mode():
        expected = bilm(bilm.token_ids().batch([words])).layers[:, 0].numpy()
    assert np.abs(doc._.elmo_layers - expected).max() < ATOL
