"""Forked children after the parent ran torch's thread pool (spacy_elmo/bilm/fork.py).

Without the fork handler, a child's first parallel op hangs (GNU OpenMP does not survive a
fork once its pool has run); these tests time out instead of hanging."""

import multiprocessing

import numpy as np
import pytest
import torch


@pytest.fixture
def two_threads():
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    a = torch.randn(512, 512)
    for _ in range(5):
        a @ a  # the pool has run
    yield
    torch.set_num_threads(before)


def _matmuls(queue):
    a = torch.randn(512, 512)
    for _ in range(5):
        a @ a
    queue.put(torch.get_num_threads())


def test_a_forked_child_runs_torch_with_one_thread(two_threads):
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_matmuls, args=(queue,))
    child.start()
    child.join(30)
    if child.is_alive():
        child.kill()
        pytest.fail("the forked child hung in torch's thread pool")
    assert child.exitcode == 0 and queue.get(timeout=5) == 1
    assert torch.get_num_threads() == 2  # the parent keeps its own


def test_nlp_pipe_with_processes_after_the_parent_used_two_threads(nlp_elmo, two_threads):
    texts = ["A first sentence here .", "And another one", "Short", "The last text ."] * 2
    single = [doc._.elmo for doc in nlp_elmo.pipe(texts, batch_size=2)]  # 2 threads
    context = multiprocessing.get_context("fork")
    queue = context.Queue()

    def run(queue):
        queue.put([doc._.elmo for doc in nlp_elmo.pipe(texts, batch_size=2, n_process=2)])

    child = context.Process(target=run, args=(queue,))  # nlp.pipe forks its own workers
    child.start()
    child.join(60)
    if child.is_alive():
        child.kill()
        pytest.fail("nlp.pipe(n_process=2) hung after the parent used two threads")
    multi = queue.get(timeout=5)
    assert len(multi) == len(single)
    for a, b in zip(single, multi, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
