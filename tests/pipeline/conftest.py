import random
from pathlib import Path

import pytest
import spacy
from spacy.tokens import Doc, DocBin, Span

from spacy_elmo.bilm import save_bilm

from ..conftest import make_random_bilm

CONFIGS = Path(__file__).resolve().parents[2] / "configs"


@pytest.fixture(scope="session")
def weights_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("pipeline_bilm")
    save_bilm(make_random_bilm(), out)
    return out


@pytest.fixture
def nlp_elmo(weights_dir):
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo", config={"weights": str(weights_dir), "store_layers": True})
    return nlp


def toy_docs(nlp, n: int, seed: int = 0):
    rng = random.Random(seed)
    names = ["Alice", "Bob", "Carol", "Dave"]
    cities = ["Paris", "London", "Berlin", "Rome"]
    docs = []
    for _ in range(n):
        city = rng.choice(cities)
        words = [rng.choice(names), "went", "to", city, "today", "."]
        doc = Doc(nlp.vocab, words=words, sent_starts=[True] + [False] * 5)
        doc.ents = [Span(doc, 0, 1, "PER"), Span(doc, 3, 4, "LOC")]
        south = city in ("Paris", "Rome")  # a label the text decides
        doc.cats = {"SOUTH": float(south), "NORTH": float(not south)}
        docs.append(doc)
    return docs


@pytest.fixture(scope="session")
def toy_corpus(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("toy_corpus")
    nlp = spacy.blank("en")
    DocBin(docs=toy_docs(nlp, 24)).to_disk(out / "train.spacy")
    DocBin(docs=toy_docs(nlp, 8, seed=1)).to_disk(out / "dev.spacy")
    return out
