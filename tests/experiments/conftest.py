from pathlib import Path

import pytest
import spacy
from spacy.tokens import DocBin

from spacy_elmo.experiments.tiny import toy_docs


@pytest.fixture(scope="session")
def toy_corpus(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("toy_corpus")
    nlp = spacy.blank("en")
    DocBin(docs=toy_docs(nlp, 24)).to_disk(out / "train.spacy")
    DocBin(docs=toy_docs(nlp, 8, seed=1)).to_disk(out / "dev.spacy")
    return out
