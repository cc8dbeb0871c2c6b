"""The converters and readers on the real datasets in ../shared/data (skipped without it):
the formats as published, not only the hand-written samples of the other tests."""

import spacy
from spacy.tokens import DocBin
from spacy_elmo_lab import convert

from .conftest import shared_data
from .test_wic_probe import wic


def test_conll2003_sentences_and_its_four_entity_types(tmp_path):
    source = shared_data("conll2003", "valid.txt")
    convert.ner(source, tmp_path / "dev.spacy", sentences_per_doc=1, limit=200)
    docs = list(DocBin().from_disk(tmp_path / "dev.spacy").get_docs(spacy.blank("en").vocab))
    assert len(docs) == 200 and "-DOCSTART-" not in {t.text for d in docs for t in d}
    assert {e.label_ for d in docs for e in d.ents} == {"PER", "LOC", "ORG", "MISC"}
    assert all(not d.text.endswith(" ") for d in docs)


def test_thucnews_train_split_has_the_ten_named_classes(tmp_path):
    titles = shared_data("zh", "thucnews_titles")
    convert.textcat(titles / "train.txt", tmp_path / "train.spacy", format="tsv", lang="zh",
                    limit=500, label_names=titles / "class.txt")
    docs = list(DocBin().from_disk(tmp_path / "train.spacy").get_docs(spacy.blank("zh").vocab))
    names = (titles / "class.txt").read_text(encoding="utf-8").split()
    assert len(docs) == 500 and sorted(docs[0].cats) == sorted(names) and len(names) == 10
    assert all(sum(d.cats.values()) == 1.0 for d in docs)
    first = (titles / "train.txt").read_text(encoding="utf-8").splitlines()[0].split("\t")
    assert docs[0].text == first[0]  # characters as tokens, joined without spaces
    assert max(docs[0].cats, key=docs[0].cats.get) == names[int(first[1])]


def test_wic_release_reads_and_pairs_point_at_the_target_word():
    pairs = wic.read_wic(shared_data("wic"), "dev")
    assert len(pairs) == 638 and 0.4 < sum(p.same for p in pairs) / len(pairs) < 0.6
    # the target index points at a form of the lemma in both sentences for most pairs
    hits = sum(all(p.word[:3].lower() in p.tokens[k][p.index[k]].lower() for k in (0, 1))
               for p in pairs)
    assert hits / len(pairs) > 0.8
