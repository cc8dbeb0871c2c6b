"""What the server tests share: the AllenNLP fixture's biLM and sentences, `embed`'s own
answers for them, an in-process client, and a tiny saved pipeline. Tests that need FastAPI
(the `serve` extra) or an HTTP client skip without them."""

import warnings
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Dict, Iterator, List

import h5py
import numpy as np
import pytest

from spacy_elmo.embed.job import embed_file
from spacy_elmo.serve.limits import Batching, Limits, ServeSettings
from spacy_elmo.serve.served import Served, open_served

from ..conftest import FIXTURE_DIR

WEIGHTS = FIXTURE_DIR / "lm_weights.hdf5"
OPTIONS = FIXTURE_DIR / "options.json"


def split_lengths(array: np.ndarray, lengths: str) -> List[np.ndarray]:
    """A binary answer split back into one array a sentence (`lengths`: X-Elmo-Lengths), as
    docs/serving.md shows clients."""
    counts = [int(n) for n in lengths.split(",")] if lengths else []
    return np.split(array, np.cumsum(counts)[:-1], axis=-2) if counts else []


def fixture_sentences() -> List[List[str]]:
    import json

    groups = json.loads((FIXTURE_DIR / "sentences.json").read_text(encoding="utf-8"))
    return [s.split() for group in groups for s in group]


def embed_alone(tmp_path: Path, tokens: List[str], layers: str = "all") -> np.ndarray:
    """What `spacy-elmo embed` writes for this sentence alone (a one-line file)."""
    text, out = tmp_path / "one.txt", tmp_path / "one.hdf5"
    text.write_text(" ".join(tokens) + "\n", encoding="utf-8")
    embed_file(text, out, weights=WEIGHTS, options=OPTIONS, layers=layers, progress=False,
               overwrite=True)
    with h5py.File(out, "r") as f:
        return f["0"][...]


@pytest.fixture(scope="session")
def embedded(tmp_path_factory) -> Dict[str, Any]:
    """Each fixture sentence's `embed` output alone, layers all (index: its number)."""
    tmp = tmp_path_factory.mktemp("embed_alone")
    sentences = fixture_sentences()
    return {"sentences": sentences, "all": [embed_alone(tmp, s) for s in sentences]}


@pytest.fixture(scope="session")
def served_bilm() -> Served:
    return open_served(str(WEIGHTS), options=str(OPTIONS))


def test_client_class() -> Any:
    """starlette's TestClient (skips the test without FastAPI or an HTTP client for it)."""
    pytest.importorskip("fastapi", reason="the serve extra is not installed")
    with warnings.catch_warnings():  # starlette may prefer another httpx package
        warnings.simplefilter("ignore")
        try:
            from starlette.testclient import TestClient
        except (ImportError, RuntimeError) as err:
            pytest.skip(f"no HTTP client for starlette's TestClient: {err}")
    return TestClient


@contextmanager
def client(served: Served, *, limits: Limits = Limits(), batching: Batching = Batching(),
           **settings: Any) -> Iterator[Any]:
    """An in-process client of the app serving `served` (its batcher runs meanwhile)."""
    TestClient = test_client_class()
    from spacy_elmo.serve.app import make_app

    app = make_app(served, ServeSettings(limits=limits, batching=batching, **settings))
    with TestClient(app, raise_server_exceptions=False) as c:
        c.app_state = app.state.elmo
        yield c


@pytest.fixture(scope="session")
def pipeline_dir(tmp_path_factory, tiny_weights_dir) -> Path:
    """A saved pipeline: sentencizer + elmo (the tiny biLM, a mix of its own)."""
    import spacy

    nlp = spacy.blank("en")
    nlp.add_pipe("sentencizer")
    nlp.add_pipe("elmo", config={"weights": str(tiny_weights_dir),
                                 "mix_weights": [1.0, 2.0, 3.0], "gamma": 0.5})
    nlp.initialize()
    out = tmp_path_factory.mktemp("pipeline") / "nlp"
    nlp.to_disk(out)
    return out
