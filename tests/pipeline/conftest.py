from pathlib import Path

import pytest
import spacy
from spacy.tokens import DocBin

from spacy_elmo.bilm import save_bilm
from spacy_elmo.experiments.tiny import toy_docs

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


@pytest.fixture(scope="session")
def toy_corpus(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("toy_corpus")
    nlp = spacy.blank("en")
    DocBin(docs=toy_docs(nlp, 24)).to_disk(out / "train.spacy")
    DocBin(docs=toy_docs(nlp, 8, seed=1)).to_disk(out / "dev.spacy")
    return out
