from pathlib import Path

import pytest
import spacy

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

