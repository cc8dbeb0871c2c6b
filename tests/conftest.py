import json
import multiprocessing
import os
import signal
from pathlib import Path
from typing import Any, Callable

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before torch starts (see README)

import pytest  # noqa: E402
import torch  # noqa: E402
from spacy_elmo_lab.tiny import TINY_OPTIONS, make_random_bilm  # noqa: E402,F401

from spacy_elmo.bilm import BiLM, save_bilm  # noqa: E402
from spacy_elmo.bilm.lstm import LSTMState  # noqa: E402

torch.set_num_threads(1)

FIXTURE_DIR = Path(__file__).parent / "fixtures" / "allennlp_elmo"
SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


@pytest.fixture(scope="session")
def fixture_dir() -> Path:
    return FIXTURE_DIR


@pytest.fixture(scope="session")
def fixture_sentences():
    return json.loads((FIXTURE_DIR / "sentences.json").read_text())


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


@pytest.fixture(scope="session")
def toy_corpus(tmp_path_factory) -> Path:
    """train.spacy (24 docs) and dev.spacy (8) of toy NER + textcat docs."""
    import spacy
    from spacy.tokens import DocBin
    from spacy_elmo_lab.tiny import toy_docs

    out = tmp_path_factory.mktemp("toy_corpus")
    nlp = spacy.blank("en")
    DocBin(docs=toy_docs(nlp, 24)).to_disk(out / "train.spacy")
    DocBin(docs=toy_docs(nlp, 8, seed=1)).to_disk(out / "dev.spacy")
    return out


@pytest.fixture
def default_sigint():
    """SIGINT raising KeyboardInterrupt during the test, as in an interactive shell: a
    suite run in the background (`pytest &`, nohup, some CI runners) inherits SIGINT
    ignored, which the commands rightly keep ignored."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def in_forked_child(fn: Callable[[], Any], timeout: float, what: str) -> Any:
    """fn()'s result, computed in a forked child; the test fails (instead of hanging) when
    the child is still running after `timeout` seconds."""
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=lambda: queue.put(fn()))
    child.start()
    child.join(timeout)
    if child.is_alive():
        child.kill()
        pytest.fail(f"{what} hung in a forked child")
    assert child.exitcode == 0
    return queue.get(timeout=5)


def run_lstm(bilm, x, lengths, state, fused):
    """Outputs, final state and every gradient of a fixed random loss over all of them."""
    bilm.zero_grad()
    bilm.lstm.set_fused_backward(fused)
    x = x.clone().requires_grad_(True)
    h0 = state.h.clone().requires_grad_(True)
    c0 = state.c.clone().requires_grad_(True)
    outputs, final = bilm.lstm(x[0], x[1], lengths, LSTMState(h0, c0))
    gen = torch.Generator().manual_seed(3)
    loss = sum((o * torch.randn(o.shape, generator=gen)).sum() for o in outputs)
    loss = loss + (final.h * torch.randn(final.h.shape, generator=gen)).sum()
    loss = loss + (final.c * torch.randn(final.c.shape, generator=gen)).sum()
    loss.backward()
    grads = [x.grad, h0.grad, c0.grad] + [p.grad.clone() for p in bilm.lstm.parameters()]
    return [o.detach() for o in outputs] + [final.h.detach(), final.c.detach()], grads


def embedded_at(tmp_path: Path, sentences, weights: Path, precisions):
    """`spacy-elmo embed`'s vectors of each sentence (one a line) at each precision: the text
    file written, and precision -> a tensor per sentence."""
    import h5py

    from spacy_elmo.embed.job import embed_file

    text = tmp_path / "in.txt"
    text.write_text("\n".join(" ".join(s) for s in sentences) + "\n", encoding="utf-8")
    out = {}
    for precision in precisions:
        path = tmp_path / f"{precision}.hdf5"
        embed_file(text, path, weights=weights, precision=precision, progress=False)
        with h5py.File(path, "r") as f:
            out[precision] = [torch.from_numpy(f[str(i)][()]) for i in range(len(sentences))]
    return text, out
