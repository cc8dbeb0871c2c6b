"""configs/spancat_elmo.cfg: `spacy train` on a few span-annotated sentences (nested spans
included), in English and with --nlp.lang zh; the saved pipeline predicts into
doc.spans["sc"] and the spancat's listener has learned its own layer mix. (torch runs on
one thread: tests/conftest.py.)"""

from pathlib import Path
from typing import List, Sequence, Tuple

import numpy as np
import spacy
import srsly
from spacy.cli._util import parse_config_overrides
from spacy.cli.train import train
from spacy.language import Language
from spacy.tokens import Doc, DocBin, Span
from spacy.training.initialize import init_nlp
from spacy.util import load_config

from spacy_elmo.ml.scalar_mix import scalar_mixes

from .conftest import CONFIGS

CONFIG = CONFIGS / "spancat_elmo.cfg"

Annotated = Tuple[str, Sequence[Tuple[int, int, str]]]

# words split on spaces; (start, end, label) in tokens; ORG spans hold a LOC span
ENGLISH: List[Annotated] = [
    ("Alice Smith works at the Bank of Rome .", [(0, 2, "PER"), (5, 8, "ORG"), (7, 8, "LOC")]),
    ("Bob Jones visited Paris in May .", [(0, 2, "PER"), (3, 4, "LOC")]),
    ("The University of Oslo hired Carol White .",
     [(1, 4, "ORG"), (3, 4, "LOC"), (5, 7, "PER")]),
    ("Dave Brown left the Bank of Berlin .", [(0, 2, "PER"), (4, 7, "ORG"), (6, 7, "LOC")]),
    ("Eve Green flew from London to Madrid .", [(0, 2, "PER"), (4, 5, "LOC"), (6, 7, "LOC")]),
    ("Frank Black teaches at the University of Lima .",
     [(0, 2, "PER"), (5, 8, "ORG"), (7, 8, "LOC")]),
    ("Grace Hall lives in Vienna .", [(0, 2, "PER"), (4, 5, "LOC")]),
    ("Henry King joined the Bank of Tokyo .", [(0, 2, "PER"), (4, 7, "ORG"), (6, 7, "LOC")]),
]
ENGLISH_DEV: List[Annotated] = [
    ("Irene Fox works at the University of Rome .",
     [(0, 2, "PER"), (5, 8, "ORG"), (7, 8, "LOC")]),
    ("Jack Stone visited Berlin in June .", [(0, 2, "PER"), (3, 4, "LOC")]),
]
# characters as tokens (spaCy's default Chinese tokenizer); a 4-character ORG holds a LOC
CHINESE: List[Annotated] = [
    ("张三在北京大学工作。", [(0, 2, "PER"), (3, 7, "ORG"), (3, 5, "LOC")]),
    ("李四去了上海。", [(0, 2, "PER"), (4, 6, "LOC")]),
    ("王五离开了南京大学。", [(0, 2, "PER"), (5, 9, "ORG"), (5, 7, "LOC")]),
]


def _docs(nlp: Language, sentences: List[Annotated]) -> List[Doc]:
    docs = []
    for text, spans in sentences:
        words = text.split(" ") if nlp.lang == "en" else list(text)
        spaces = [nlp.lang == "en" and i < len(words) - 1 for i in range(len(words))]
        doc = Doc(nlp.vocab, words=words, spaces=spaces)
        doc.spans["sc"] = [Span(doc, start, end, label) for start, end, label in spans]
        docs.append(doc)
    return docs


def _corpus(tmp_path: Path, lang: str, train_set: List[Annotated],
            dev_set: List[Annotated]) -> dict:
    nlp = spacy.blank(lang)
    paths = {}
    for split, sentences in (("train", train_set), ("dev", dev_set)):
        path = tmp_path / f"{lang}_{split}.spacy"
        DocBin(docs=_docs(nlp, sentences)).to_disk(path)
        paths[f"paths.{split}"] = str(path)
    return paths


def _mix(nlp: Language) -> Tuple[np.ndarray, np.ndarray]:
    (mix,) = scalar_mixes(nlp.get_pipe("spancat").model)
    return mix.get_param("w").copy(), mix.get_param("gamma").copy()


def _gold(sentences: List[Annotated]) -> List[set]:
    return [set(spans) for _, spans in sentences]


def _predicted(nlp: Language, sentences: List[Annotated]) -> List[set]:
    out = []
    for doc in nlp.pipe(text for text, _ in sentences):
        group = doc.spans["sc"]
        scores = group.attrs["scores"]
        assert len(scores) == len(group) and all(0.5 <= s <= 1.0 for s in scores)
        out.append({(s.start, s.end, s.label_) for s in group})
    return out


def test_spancat_elmo_trains_saves_and_predicts_nested_spans(weights_dir, tmp_path):
    overrides = {**_corpus(tmp_path, "en", ENGLISH, ENGLISH_DEV),
                 "paths.elmo_weights": str(weights_dir),
                 "training.max_steps": 100, "training.eval_frequency": 50,
                 "training.optimizer.learn_rate": 0.003}
    fresh = init_nlp(load_config(CONFIG, overrides=overrides))
    assert set(fresh.get_pipe("spancat").labels) == {"LOC", "ORG", "PER"}
    w_before, gamma_before = _mix(fresh)
    train(CONFIG, tmp_path / "out", overrides=overrides)

    meta = srsly.read_json(tmp_path / "out" / "model-best" / "meta.json")
    assert {"spans_sc_f", "spans_sc_p", "spans_sc_r"} <= set(meta["performance"])
    nlp = spacy.load(tmp_path / "out" / "model-last")
    assert nlp.pipe_names == ["elmo", "spancat"]
    assert nlp.get_pipe("elmo").listening_components == ["spancat"]
    w, gamma = _mix(nlp)
    assert w.shape == w_before.shape == (3,)  # the tiny biLM's token layer + 2 LSTM layers
    assert not np.allclose(w, w_before) and not np.allclose(gamma, gamma_before)
    # the training sentences' spans, the nested LOC inside each ORG among them
    predicted, gold = _predicted(nlp, ENGLISH), _gold(ENGLISH)
    found = sum(len(p & g) for p, g in zip(predicted, gold, strict=True))
    assert found >= 0.8 * sum(len(g) for g in gold), (predicted, gold)  # recall
    assert found >= 0.8 * sum(len(p) for p in predicted), (predicted, gold)  # precision
    nested = [(7, 8, "LOC"), (5, 8, "ORG")]
    assert set(nested) <= predicted[0], predicted[0]


def test_spancat_elmo_in_chinese_by_override(weights_dir, tmp_path):
    """The command line of the config's header: --nlp.lang zh, a longer suggester."""
    args = ["--nlp.lang", "zh", "--components.spancat.suggester.sizes", "[1,2,3,4,5,6]",
            "--paths.elmo_weights", str(weights_dir),
            "--training.max_steps", "2", "--training.eval_frequency", "1"]
    overrides = {**_corpus(tmp_path, "zh", CHINESE, CHINESE[:1]),
                 **parse_config_overrides(args)}  # as `spacy train` reads its command line
    train(CONFIG, tmp_path / "out", overrides=overrides)
    nlp = spacy.load(tmp_path / "out" / "model-last")
    assert nlp.lang == "zh" and set(nlp.get_pipe("spancat").labels) == {"PER", "ORG", "LOC"}
    doc = nlp("张三在北京大学工作。")
    assert [t.text for t in doc][:3] == ["张", "三", "在"]
    candidates = nlp.get_pipe("spancat").suggester([doc]).dataXd  # (start, end) rows
    assert set((candidates[:, 1] - candidates[:, 0]).tolist()) == {1, 2, 3, 4, 5, 6}
    assert "sc" in doc.spans
    assert all(s.label_ in ("PER", "ORG", "LOC") and len(s) <= 6 for s in doc.spans["sc"])
