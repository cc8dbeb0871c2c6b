"""The spaCy project and its scripts: commands point at real files; converters are right."""

import importlib.util
import re
import sys
from pathlib import Path

import pytest
import spacy
import srsly
from spacy.tokens import DocBin

ROOT = Path(__file__).resolve().parents[1]


def _load_convert(name="convert"):
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_project_commands_reference_existing_files():
    project = srsly.read_yaml(ROOT / "project.yml")
    names = {c["name"] for c in project["commands"]}
    for workflow in project["workflows"].values():
        assert set(workflow) <= names
    for command in project["commands"]:
        for line in command["script"]:
            for ref in re.findall(r"(?:configs|scripts|demo/data)/[\w./-]+", line):
                assert (ROOT / ref).exists(), (command["name"], ref)


@pytest.mark.parametrize("tags,expected", [
    (["B-PER", "I-PER", "O", "B-LOC"], ["B-PER", "L-PER", "O", "U-LOC"]),
    (["S-ORG", "O", "B-NAME", "M-NAME", "E-NAME"], ["U-ORG", "O", "B-NAME", "I-NAME", "L-NAME"]),
    (["I-ORG", "I-ORG", "O"], ["B-ORG", "L-ORG", "O"]),  # IOB1 / a slip: inside without begin
    (["B-ORG", "O", "M-ORG"], ["U-ORG", "O", "U-ORG"]),
])
def test_tag_schemes_to_biluo(tags, expected):
    assert _load_convert()._to_biluo(tags) == expected


def test_convert_ner_and_textcat(tmp_path):
    convert = _load_convert()
    conll = tmp_path / "ner.txt"
    conll.write_text("-DOCSTART- -X- -X- O\n\nEU NNP B-NP B-ORG\nrejects VBZ B-VP O\n"
                     "German JJ B-NP B-MISC\n\nPeter NNP B-NP B-PER\nBlackburn NNP I-NP I-PER\n")
    convert.ner(conll, tmp_path / "ner.spacy", sentences_per_doc=10, lang="en",
                strip_position_digit=False, limit=0, cats_from_entities=True)
    doc = list(DocBin().from_disk(tmp_path / "ner.spacy").get_docs(spacy.blank("en").vocab))[0]
    assert [(e.text, e.label_) for e in doc.ents] == [
        ("EU", "ORG"), ("German", "MISC"), ("Peter Blackburn", "PER")]
    assert len(list(doc.sents)) == 2
    assert doc.cats == {"ENTITY": 1.0, "NO_ENTITY": 0.0}
    weibo = tmp_path / "weibo.txt"
    weibo.write_text("北0\tB-GPE.NAM\n京1\tI-GPE.NAM\n好0\tO\n", encoding="utf-8")
    convert.ner(weibo, tmp_path / "weibo.spacy", sentences_per_doc=1, lang="zh",
                strip_position_digit=True, limit=0, cats_from_entities=False)
    doc = list(DocBin().from_disk(tmp_path / "weibo.spacy").get_docs(spacy.blank("zh").vocab))[0]
    assert doc.text == "北京好" and [e.text for e in doc.ents] == ["北京"]
    many = tmp_path / "many.txt"
    many.write_text("".join(f"w{i}\tB-PER\nx\tO\n\n" for i in range(20)), encoding="utf-8")
    convert.ner(many, tmp_path / "a.spacy", sentences_per_doc=1, lang="en",
                strip_position_digit=False, limit=0, cats_from_entities=False, split=0.25,
                split_output=tmp_path / "b.spacy", seed=0)
    vocab = spacy.blank("en").vocab
    a, b = (list(DocBin().from_disk(tmp_path / n).get_docs(vocab)) for n in ("a.spacy", "b.spacy"))
    assert (len(a), len(b)) == (15, 5)
    assert sorted(d.ents[0].text for d in a + b) == sorted(f"w{i}" for i in range(20))
    trec = tmp_path / "trec.txt"
    trec.write_text("DESC:manner How did serfdom develop ?\nHUM:ind Who was Caesar ?\n"
                    "NUM:date When ?\nHUM:gr Which team ?\n")
    convert.textcat(trec, tmp_path / "train.spacy", format="trec", lang="en", label_first=False,
                    multilabel=False, limit=0, split=0.5, split_output=tmp_path / "dev.spacy",
                    seed=0, label_names=None)
    vocab = spacy.blank("en").vocab
    train = list(DocBin().from_disk(tmp_path / "train.spacy").get_docs(vocab))
    dev = list(DocBin().from_disk(tmp_path / "dev.spacy").get_docs(vocab))
    assert len(train) == len(dev) == 2
    for doc in train + dev:
        assert sorted(doc.cats) == ["DESC", "HUM", "NUM"] and sum(doc.cats.values()) == 1.0


def test_results_table_puts_models_down_tasks_across_with_the_difference_to_cnn():
    compare = _load_convert("compare")
    rows = {("ner", "cnn"): {"dev": 90.0, "test": 85.0}, ("ner", "elmo"): {"dev": 91.0,
            "test": 87.5}, ("trec", "elmo"): {"dev": 80.0, "test": 78.0},
            ("msra", "cnn"): {"test": 70.0}}
    lines = compare.score_table(rows, compare.ENGLISH)
    assert lines[0] == "| model | CoNLL-2003 NER (F1) | TREC-6 (accuracy) |"
    assert lines[2] == "| spaCy CNN baseline | 85.0 (90.0) | - |"
    assert lines[3] == "| ELMo listener | 87.5 (91.0) +2.5 | 78.0 (80.0) |"
    assert len(lines) == 4
    assert compare.score_table(rows, ["weibo"]) == []
