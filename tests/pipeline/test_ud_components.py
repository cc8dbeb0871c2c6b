"""ELMo under every trainable spaCy component, on a tiny UD English EWT sample: each component
learns from a listener, several listeners share one biLM run, fine-tuning gradients of all
listeners meet in one backward pass, and a joint pipeline saves and loads exactly."""

from pathlib import Path
from typing import Dict, List

import numpy as np
import pytest
import spacy
import torch
from spacy.tokens import DocBin, Span
from spacy.training import Example
from spacy.training.converters import conllu_to_docs
from thinc.api import Adam, Config

from spacy_elmo.ml.elmo_model import get_holder
from spacy_elmo.pipeline import ElmoListener

from .conftest import CONFIGS

UD_SAMPLE = Path(__file__).resolve().parents[1] / "fixtures" / "ud_ewt_sample"
UD_COMPONENTS = ["tagger", "morphologizer", "parser", "trainable_lemmatizer"]
SMALL = 32  # listener width in these tests


def ud_docs(split: str):
    text = (UD_SAMPLE / f"{split}.conllu").read_text(encoding="utf-8")
    return list(conllu_to_docs(text, n_sents=1, merge_subtokens=False, no_print=True))


def ud_config(weights_dir: Path, components: List[str], grad_factor: float = 0.0) -> Config:
    """configs/ud_elmo.cfg cut down to `components`, small widths, no dropout."""
    config = Config().from_disk(CONFIGS / "ud_elmo.cfg")
    config["paths"]["elmo_weights"] = str(weights_dir)
    config["nlp"]["pipeline"] = ["elmo", *components]
    for name in UD_COMPONENTS:
        if name not in components:
            del config["components"][name]
    for name in components:
        tok2vec = config["components"][name]["model"]["tok2vec"]
        tok2vec.update(width=SMALL, dropout=0.0, grad_factor=grad_factor)
        tok2vec["encode"].update(width=SMALL, depth=1)
    if "trainable_lemmatizer" in components:
        config["components"]["trainable_lemmatizer"]["min_tree_freq"] = 1
    return config


def build(weights_dir: Path, components: List[str], grad_factor: float = 0.0):
    nlp = spacy.util.load_model_from_config(ud_config(weights_dir, components, grad_factor),
                                            auto_fill=True, validate=True)
    examples = [Example(nlp.make_doc(d.text), d) for d in ud_docs("train")]
    nlp.initialize(lambda: examples)
    return nlp, examples


def annotations(docs) -> Dict[str, list]:
    return {
        "tag": [t.tag_ for d in docs for t in d],
        "pos": [t.pos_ for d in docs for t in d],
        "morph": [str(t.morph) for d in docs for t in d],
        "head": [t.head.i for d in docs for t in d],
        "dep": [t.dep_ for d in docs for t in d],
        "lemma": [t.lemma_ for d in docs for t in d],
    }


@pytest.mark.parametrize("component,score,attr", [
    ("tagger", "tag_acc", "TAG"), ("morphologizer", "pos_acc", "POS"),
    ("parser", "dep_uas", "DEP"), ("trainable_lemmatizer", "lemma_acc", "LEMMA")])
def test_each_ud_component_learns_from_the_listener(weights_dir, component, score, attr):
    nlp, examples = build(weights_dir, [component])
    assert nlp.get_pipe("elmo").listening_components == [component]
    optimizer = Adam(0.01)
    scores, losses = [], []
    for _ in range(20):
        step: Dict[str, float] = {}
        nlp.update(examples, sgd=optimizer, losses=step)
        losses.append(step[component])
        scores.append(nlp.evaluate(examples)[score])
    assert losses[-1] < 0.8 * losses[0], losses
    assert max(scores[-5:]) > scores[0], scores
    doc = nlp("The head of the firm was run by a third .")
    assert doc.has_annotation(attr, require_complete=True)


def test_spancat_and_senter_listen_too(weights_dir):
    config = ud_config(weights_dir, [])
    for name, factory in (("spancat", "spancat"), ("senter", "senter")):
        config["nlp"]["pipeline"].append(name)
        model = {"@architectures": "spacy.Tagger.v2", "nO": None, "normalize": False} \
            if name == "senter" else {
                "@architectures": "spacy.SpanCategorizer.v1",
                "reducer": {"@layers": "spacy.mean_max_reducer.v1", "hidden_size": 16},
                "scorer": {"@layers": "spacy.LinearLogistic.v1", "nO": None, "nI": None}}
        model["tok2vec"] = {"@architectures": "spacy-elmo.ElmoListener.v1", "upstream": "elmo",
                            "width": SMALL, "dropout": 0.0, "features": None}
        config["components"][name] = {"factory": factory, "model": model}
    nlp = spacy.util.load_model_from_config(config, auto_fill=True, validate=True)
    examples = []
    for doc in ud_docs("train")[:16]:
        # spans: every noun with its determiner or adjective just before it
        doc.spans["sc"] = [Span(doc, t.i - 1, t.i + 1, label="NP") for t in doc
                           if t.pos_ == "NOUN" and t.i and doc[t.i - 1].pos_ in ("DET", "ADJ")]
        examples.append(Example(nlp.make_doc(doc.text), doc))
    nlp.initialize(lambda: examples)
    assert sorted(nlp.get_pipe("elmo").listening_components) == ["senter", "spancat"]
    optimizer = nlp.create_optimizer()
    losses: Dict[str, float] = {}
    first = None
    for _ in range(10):
        losses = {}
        nlp.update(examples, sgd=optimizer, losses=losses)
        first = first or dict(losses)
    assert losses["spancat"] < first["spancat"] and losses["senter"] < first["senter"]
    doc = nlp("A big dog saw the cat .")
    assert "sc" in doc.spans and doc.has_annotation("SENT_START")


def _bilm_forward_calls(nlp) -> List[int]:
    calls = [0]
    bilm = get_holder(nlp.get_pipe("elmo").model).bilm
    bilm.register_forward_hook(lambda *_: calls.__setitem__(0, calls[0] + 1))
    return calls


def test_three_listeners_run_the_frozen_biLM_once_per_batch(weights_dir):
    counts = {}
    for components in (["tagger"], ["tagger", "parser", "trainable_lemmatizer"]):
        nlp, examples = build(weights_dir, components)
        nlp.get_pipe("elmo").model.attrs["output_cache"].clear()
        calls = _bilm_forward_calls(nlp)
        nlp.update(examples, sgd=nlp.create_optimizer())
        counts[len(components)] = calls[0]
    assert counts[1] >= 1
    assert counts[3] == counts[1]


def test_fine_tuning_gradients_of_all_listeners_are_summed_in_one_backward(weights_dir):
    """The biLM's gradients with tagger and parser fine-tuning at once equal the sum of each
    one's alone (same weights, same batch, no dropout), from a single backward pass."""
    torch.manual_seed(0)
    nlp, examples = build(weights_dir, ["tagger", "parser"], grad_factor=1.0)
    optimizer = Adam(0.01)
    for _ in range(3):  # the heads' output layers start at zero: no gradient reaches the biLM
        nlp.update(examples, sgd=optimizer)
    state = nlp.to_bytes()
    elmo = nlp.get_pipe("elmo")
    shim = elmo.model.layers[0].shims[0]

    def bilm_grads(active: List[str]) -> Dict[str, np.ndarray]:
        nlp.from_bytes(state)
        for name in ("tagger", "parser"):
            (listener,) = [node for node in nlp.get_pipe(name).model.walk()
                           if isinstance(node, ElmoListener)]
            listener.attrs["grad_factor"] = 1.0 if name in active else 0.0
        backward_calls = _bilm_backward_counter(get_holder(elmo.model).bilm)
        grads: Dict[str, np.ndarray] = {}

        def record(key, param, grad):
            if key[0] == shim.id:
                grads[key[1]] = np.array(grad, copy=True)
            return param, grad * 0

        spacy.util.fix_random_seed(0)  # the parser's oracle cuts its sequences at random
        nlp.update(examples, sgd=record, drop=0.0)
        elmo.finish_update(record)  # the biLM's backward pass runs once all have reported
        assert backward_calls[0] == 1
        return grads

    both = bilm_grads(["tagger", "parser"])
    tagger, parser = bilm_grads(["tagger"]), bilm_grads(["parser"])
    assert both and set(both) == set(tagger) == set(parser)
    moved = 0
    for name, grad in both.items():
        np.testing.assert_allclose(grad, tagger[name] + parser[name], rtol=1e-4, atol=1e-4,
                                   err_msg=name)
        moved += bool(np.abs(tagger[name]).sum() and np.abs(parser[name]).sum())
    assert moved > 0


def _bilm_backward_counter(bilm: torch.nn.Module) -> List[int]:
    calls = [0]
    first = next(p for p in bilm.parameters() if p.requires_grad)

    def hook(grad):
        calls[0] += 1
        return grad

    first.register_hook(hook)
    return calls


def test_a_frozen_listening_component_breaks_nothing(weights_dir, tmp_path):
    """[training] frozen_components: the frozen parser's listener sits out every update;
    the other tasks train and the parser's predictions stay as they were."""
    from spacy.cli.train import train

    corpus = tmp_path / "corpus"
    corpus.mkdir()
    DocBin(docs=ud_docs("train")).to_disk(corpus / "train.spacy")
    DocBin(docs=ud_docs("dev")).to_disk(corpus / "dev.spacy")
    first, _ = build(weights_dir, ["tagger", "parser"])
    first.to_disk(tmp_path / "start")
    config = first.config.copy()
    config["components"]["parser"] = {"source": str(tmp_path / "start")}
    config["training"].update(frozen_components=["parser"], max_steps=6, eval_frequency=3)
    config["corpora"]["train"]["path"] = str(corpus / "train.spacy")
    config["corpora"]["dev"]["path"] = str(corpus / "dev.spacy")
    config.to_disk(tmp_path / "config.cfg")
    train(tmp_path / "config.cfg", tmp_path / "out")
    trained = spacy.load(tmp_path / "out" / "model-last")
    docs = ud_docs("dev")
    texts = [d.text for d in docs]
    start = annotations(first.pipe(texts))
    end = annotations(trained.pipe(texts))
    assert end["head"] == start["head"] and end["dep"] == start["dep"]
    assert trained.evaluate([Example(trained.make_doc(d.text), d) for d in docs])["tag_acc"] > 0


def test_joint_ud_pipeline_saves_and_loads_exactly(weights_dir, tmp_path):
    nlp, examples = build(weights_dir, UD_COMPONENTS)
    assert sorted(nlp.get_pipe("elmo").listening_components) == sorted(UD_COMPONENTS)
    optimizer = nlp.create_optimizer()
    for _ in range(5):
        nlp.update(examples, sgd=optimizer)
    texts = [d.text for d in ud_docs("dev")]
    before = annotations(nlp.pipe(texts))
    assert len(set(before["tag"])) > 1
    nlp.to_disk(tmp_path / "ud")
    loaded = spacy.load(tmp_path / "ud")
    assert loaded.pipe_names == nlp.pipe_names
    assert annotations(loaded.pipe(texts)) == before
    again = spacy.util.load_model_from_config(nlp.config, auto_fill=True)
    assert annotations(again.from_bytes(nlp.to_bytes()).pipe(texts)) == before
