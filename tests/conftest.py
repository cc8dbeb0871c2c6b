import json
import os
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before torch starts (see README)

import pytest  # noqa: E402
import torch  # noqa: E402

from spacy_elmo.bilm import BiLM, BiLMOptions, save_bilm  # noqa: E402

torch.set_num_threads(1)

FIXTURE_DIR = Path(__file__).parent / "fixtures" / "allennlp_elmo"
SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"

TINY_OPTIONS = BiLMOptions(lstm_dim=12, projection_dim=6, n_layers=2, char_embed_dim=4,
                           filters=((1, 4), (2, 4), (3, 8)), n_highway=1)


@pytest.fixture(scope="session")
def fixture_dir() -> Path:
    return FIXTURE_DIR


@pytest.fixture(scope="session")
def fixture_sentences():
    return json.loads((FIXTURE_DIR / "sentences.json").read_text())


def make_random_bilm(options: BiLMOptions = TINY_OPTIONS, seed: int = 0) -> BiLM:
    torch.manual_seed(seed)
    bilm = BiLM(options)
    with torch.no_grad():  # make biases non-trivial so that layouts are really tested
        for p in bilm.parameters():
            p.add_(torch.randn_like(p) * 0.1)
        bilm.encoder.char_embedding.weight[0].zero_()
    return bilm.eval()


@pytest.fixture
def tiny_bilm() -> BiLM:
    return make_random_bilm()


@pytest.fixture(scope="session")
def tiny_weights_dir(tmp_path_factory) -> Path:
    """options.json + weights.hdf5 of a tiny random biLM, in the published layout."""
    out = tmp_path_factory.mktemp("tiny_bilm")
    save_bilm(make_random_bilm(), out)
    return out


def shared_data(*parts: str) -> Path:
    """A path under ../shared/data; skips the test when it is absent."""
    path = SHARED_DATA.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"shared data not available: {path}")
    return path
