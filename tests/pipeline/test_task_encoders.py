"""The encoder over ELMo as a choice of the composed configs: spaCy's CNN window encoder or a
biLSTM (`encode.kind`), ELMo again at its output (`elmo_at_output`, the paper's
[h_k ; ELMo_k]), attention pooling for text classification (`model.pool`). Each variant of
NER, textcat, tagger and parser trains a few steps on tiny data and comes back from disk
predicting the same."""

from pathlib import Path
from typing import Any, Dict, List

import numpy as np
import pytest
import spacy
from spacy.tokens import Doc, Span
from spacy.training import Example
from thinc.api import Adam, Config, Linear, Model, with_array

from spacy_elmo.errors import ElmoError
from spacy_elmo.ml.encoders import build_task_encoder, with_elmo_at_output

from .conftest import CONFIGS
from .test_ud_components import ud_docs

WIDTH = 16  # even: a biLSTM has width // 2 cells a direction
BILM_WIDTH = 12  # the tiny random biLM's output width (2 x its projection, 6)
VARIANTS = {"cnn": {"encode.kind": "cnn", "elmo_at_output": False},
            "bilstm": {"encode.kind": "bilstm", "elmo_at_output": False},
            "bilstm_elmo_at_output": {"encode.kind": "bilstm", "elmo_at_output": True}}
SENTENCES = [("Alice Smith works in Paris .", [(0, 2, "PER"), (4, 5, "LOC")]),
             ("Bob visited Rome in May .", [(0, 1, "PER"), (2, 3, "LOC")]),
             ("The weather was fine .", []),
             ("Carol Jones moved to Oslo .", [(0, 2, "PER"), (4, 5, "LOC")])]


def config_for(name: str, weights_dir: Path, component: str, variant: Dict[str, Any],
               extra: Dict[str, Any]) -> Config:
    """configs/`name`, small and without dropout, with the variant's settings of the
    component's listener and `extra` overrides (by their full path)."""
    tok2vec = f"components.{component}.model.tok2vec"
    overrides = {"paths.elmo_weights": str(weights_dir), f"{tok2vec}.width": WIDTH,
                 f"{tok2vec}.dropout": 0.0, f"{tok2vec}.encode.width": WIDTH,
                 **{f"{tok2vec}.{key}": value for key, value in variant.items()}, **extra}
    return Config().from_disk(CONFIGS / name, overrides=overrides)


def ner_examples(nlp) -> List[Example]:
    examples = []
    for text, spans in SENTENCES:
        words = text.split(" ")
        doc = Doc(nlp.vocab, words=words)
        doc.ents = [Span(doc, s, e, label) for s, e, label in spans]
        doc.cats = {"ENTITY": float(bool(spans)), "NO_ENTITY": float(not spans)}
        examples.append(Example(Doc(nlp.vocab, words=words), doc))
    return examples


def ud_examples(nlp) -> List[Example]:
    return [Example(nlp.make_doc(d.text), d) for d in ud_docs("train")[:12]]


def train_and_reload(config: Config, examples_of, tmp_path: Path, steps: int = 4):
    nlp = spacy.util.load_model_from_config(config, auto_fill=True, validate=True)
    examples = examples_of(nlp)
    nlp.initialize(lambda: examples)
    optimizer = Adam(0.01)
    losses = []
    for _ in range(steps):
        step: Dict[str, float] = {}
        nlp.update(examples, sgd=optimizer, losses=step)
        losses.append(step)
    nlp.to_disk(tmp_path / "nlp")
    return nlp, spacy.load(tmp_path / "nlp"), losses


def predictions(nlp, texts) -> list:
    out = []
    for doc in nlp.pipe(texts):
        out.append(([(e.start, e.end, e.label_) for e in doc.ents],
                    {k: round(v, 5) for k, v in doc.cats.items()},
                    [t.tag_ for t in doc], [t.head.i for t in doc], [t.dep_ for t in doc]))
    return out


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_ner_with_each_encoder_trains_and_reloads(weights_dir, tmp_path, variant):
    config = config_for("ner_elmo.cfg", weights_dir, "ner", VARIANTS[variant], {})
    nlp, loaded, losses = train_and_reload(config, ner_examples, tmp_path)
    assert losses[-1]["ner"] < losses[0]["ner"], losses
    tok2vec = next(n for n in nlp.get_pipe("ner").model.walk() if n.name == "elmo-tok2vec")
    at_output = VARIANTS[variant].get("elmo_at_output", False)
    assert tok2vec.get_dim("nO") == WIDTH + (BILM_WIDTH if at_output else 0)
    lstm = [node.name for node in tok2vec.walk() if "pytorch" in node.name.lower()]
    assert bool(lstm) == (variant != "cnn"), lstm
    texts = [text for text, _ in SENTENCES]
    assert predictions(loaded, texts) == predictions(nlp, texts)


@pytest.mark.parametrize("pool", ["reduce", "attention"])
@pytest.mark.parametrize("variant", ["cnn", "bilstm_elmo_at_output"])
def test_textcat_with_each_encoder_and_pool_trains_and_reloads(weights_dir, tmp_path,
                                                              variant, pool):
    config = config_for("textcat_elmo.cfg", weights_dir, "textcat", VARIANTS[variant],
                        {"components.textcat.model.pool": pool})
    nlp, loaded, losses = train_and_reload(config, ner_examples, tmp_path, steps=8)
    assert losses[-1]["textcat"] < losses[0]["textcat"], losses
    texts = [text for text, _ in SENTENCES]
    assert predictions(loaded, texts) == predictions(nlp, texts)


@pytest.mark.parametrize("variant", ["bilstm", "bilstm_elmo_at_output"])
def test_tagger_and_parser_with_a_biLSTM_train_and_reload(weights_dir, tmp_path, variant):
    overrides = {"paths.elmo_weights": str(weights_dir)}
    for name in ("tagger", "parser"):
        tok2vec = f"components.{name}.model.tok2vec"
        overrides.update({f"{tok2vec}.width": WIDTH, f"{tok2vec}.encode.width": WIDTH,
                          **{f"{tok2vec}.{key}": v for key, v in VARIANTS[variant].items()}})
    config = Config().from_disk(CONFIGS / "ud_elmo.cfg", overrides=overrides)
    config["nlp"]["pipeline"] = ["elmo", "tagger", "parser"]
    for name in ("morphologizer", "trainable_lemmatizer"):
        del config["components"][name]
    nlp, loaded, losses = train_and_reload(config, ud_examples, tmp_path, steps=6)
    for name in ("tagger", "parser"):
        assert losses[-1][name] < losses[0][name], (name, losses)
    texts = [d.text for d in ud_docs("dev")[:4]]
    assert predictions(loaded, texts) == predictions(nlp, texts)


def test_elmo_at_output_is_the_encoder_output_beside_the_elmo_columns():
    """Forward: [h ; x[:, -E:]]. Backward: the ELMo columns get the encoder's gradient plus
    their own part of dY; the other columns the encoder's alone."""
    encoder: Model = with_array(Linear(nO=3, nI=5))
    layer = with_elmo_at_output(encoder)
    layer.set_dim("elmo_width", 2)
    X = [np.random.RandomState(i).randn(4, 5).astype("float32") for i in range(2)]
    layer.initialize(X=X)
    assert layer.get_dim("nO") == 5
    Y, backprop = layer(X, is_train=True)
    H = encoder.predict(X)
    for y, h, x in zip(Y, H, X, strict=True):
        np.testing.assert_allclose(y, np.hstack((h, x[:, -2:])), rtol=1e-6)
    dY = [np.random.RandomState(9 + i).randn(4, 5).astype("float32") for i in range(2)]
    dX = backprop(dY)
    W = encoder.layers[0].get_param("W")  # (3, 5)
    for dx, dy in zip(dX, dY, strict=True):
        expected = dy[:, :3] @ W
        expected[:, -2:] += dy[:, 3:]
        np.testing.assert_allclose(dx, expected, rtol=1e-5, atol=1e-6)


def test_an_unknown_encoder_or_pool_names_the_choices():
    with pytest.raises(ElmoError, match=r"\[E020\].*kind.*'cnn', 'bilstm'"):
        build_task_encoder(16, kind="lstm")
    config = Config().from_disk(CONFIGS / "textcat_elmo.cfg")
    config["components"]["textcat"]["model"]["pool"] = "max"
    with pytest.raises(ElmoError, match=r"\[E020\].*pool.*'reduce', 'attention'"):
        spacy.util.load_model_from_config(config, auto_fill=True, validate=True)
