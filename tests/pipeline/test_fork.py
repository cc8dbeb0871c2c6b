"""Forked children after the parent ran torch's thread pool (spacy_elmo/bilm/fork.py).

Without the fork handler, a child's first parallel op hangs (GNU OpenMP does not survive a
fork once its pool has run); these tests time out instead of hanging."""

import numpy as np
import pytest
import torch

from ..conftest import in_forked_child


@pytest.fixture
def two_threads():
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    a = torch.randn(512, 512)
    for _ in range(5):
        a @ a  # the pool has run
    yield
    torch.set_num_threads(before)


def _matmuls():
    a = torch.randn(512, 512)
    for _ in range(5):
        a @ a
    return torch.get_num_threads()


def test_a_forked_child_runs_torch_with_one_thread(two_threads):
    assert in_forked_child(_matmuls, 30, "torch's thread pool") == 1
    assert torch.get_num_threads() == 2  # the parent keeps its own


def test_nlp_pipe_with_processes_after_the_parent_used_two_threads(nlp_elmo, two_threads):
    texts = ["A first sentence here .", "And another one", "Short", "The last text ."] * 2
    single = [doc._.elmo for doc in nlp_elmo.pipe(texts, batch_size=2)]  # 2 threads
    multi = in_forked_child(  # nlp.pipe forks its own workers
        lambda: [doc._.elmo for doc in nlp_elmo.pipe(texts, batch_size=2, n_process=2)],
        60, "nlp.pipe(n_process=2) after the parent used two threads")
    assert len(multi) == len(single)
    for a, b in zip(single, multi, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
