"""Both LSTM directions on two threads at once (`spacy_elmo.bilm.directions`).

Each direction runs the same ops on its own slice of the stacked weights, so outputs and
gradients agree with the stacked run to fp32 rounding (a batch-of-one matmul may round its
last bit differently from a batch of two); int8 products are per direction either way, but
oneDNN's kernels may round their fp32 output's last bit differently on another thread.
"""

import threading

import pytest
import torch
from spacy_elmo_lab.tiny import make_random_bilm

from spacy_elmo.bilm.directions import (
    BOTH,
    EACH,
    concurrent_directions,
    run_directions,
    set_concurrent_directions,
    use_concurrent,
)
from spacy_elmo.bilm.lstm import LSTMState
from spacy_elmo.errors import ElmoError

from ..conftest import in_forked_child

CPU = torch.device("cpu")


@pytest.fixture
def bilm():
    torch.manual_seed(0)
    return make_random_bilm().eval()


def char_ids(bilm, lengths):
    ids = torch.randint(1, 200, (len(lengths), max(lengths),
                                 bilm.options.max_characters_per_token))
    for row, n in enumerate(lengths):
        ids[row, n:] = 0
    return ids


def test_modes_and_when_they_apply():
    with concurrent_directions("off"):
        assert not use_concurrent(CPU)
    with concurrent_directions("on"):
        assert use_concurrent(CPU)
        assert not use_concurrent(torch.device("meta"))  # not a CPU: stays stacked
    threads = torch.get_num_threads()
    try:
        with concurrent_directions("auto"):
            torch.set_num_threads(1)
            assert not use_concurrent(CPU)
            torch.set_num_threads(2)
            assert use_concurrent(CPU)
    finally:
        torch.set_num_threads(threads)


def test_unknown_mode_is_refused():
    with pytest.raises(ElmoError, match="E160.*'fast'.*auto, on, off"):
        set_concurrent_directions("fast")
    assert not use_concurrent(torch.device("meta"))


def test_each_direction_runs_on_its_own_worker_thread_in_the_callers_modes():
    caller = threading.get_ident()
    seen = {}

    def fn(dirs):
        seen[dirs.start] = (dirs, threading.get_ident(), torch.is_grad_enabled(),
                            torch.is_inference_mode_enabled(), torch.get_num_threads())
        return dirs.start

    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(4)
        with concurrent_directions("on"), torch.inference_mode():
            assert run_directions(fn, CPU) == [0, 1]
        assert torch.get_num_threads() == 4  # the caller's own count is untouched
    finally:
        torch.set_num_threads(threads)
    assert (seen[0][0], seen[1][0]) == EACH
    idents = {seen[0][1], seen[1][1]}
    assert len(idents) == 2 and caller not in idents
    for _, _, grad, inference, intra in seen.values():
        assert (grad, inference, intra) == (False, True, 2)  # half the caller's 4 threads
    with concurrent_directions("off"):
        assert run_directions(lambda dirs: (dirs, threading.get_ident()), CPU) == [
            (BOTH, caller)]


def test_an_error_in_a_direction_reaches_the_caller():
    def fn(dirs):
        if dirs.start == 1:
            raise ValueError("backward direction failed")
        return 0

    with concurrent_directions("on"):
        with pytest.raises(ValueError, match="backward direction failed"):
            run_directions(fn, CPU)
        assert run_directions(lambda dirs: dirs.start, CPU) == [0, 1]  # still usable


@pytest.mark.parametrize("precision", ["fp32", "int8"])
def test_inference_matches_the_stacked_run(bilm, precision):
    if precision == "int8":
        bilm.set_precision("int8")
    ids = char_ids(bilm, [9, 6, 1, 9, 3])
    with torch.no_grad():
        with concurrent_directions("off"):
            ref = bilm(ids).layers
        with concurrent_directions("on"):
            out = bilm(ids).layers
    torch.testing.assert_close(out, ref, rtol=1e-6, atol=1e-6)
    assert not torch.equal(ref[1], ref[2])  # the layers really ran


def test_training_matches_the_stacked_run(bilm):
    """Forward and hand-written backward of both layers: outputs, final state and every
    gradient."""
    rows, steps = 4, 7
    P = bilm.options.projection_dim
    lengths = torch.tensor([7, 2, 5, 7])
    x = torch.randn(2, rows, steps, P)

    def run():
        bilm.zero_grad()
        xs = x.clone().requires_grad_(True)
        outputs, final = bilm.lstm(xs[0], xs[1], lengths,
                                   LSTMState.zeros(bilm.options, rows, CPU))
        gen = torch.Generator().manual_seed(1)
        loss = sum((o * torch.randn(o.shape, generator=gen)).sum() for o in outputs)
        (loss + final.c.sum()).backward()
        return ([o.detach() for o in outputs] + [final.h.detach()],
                [xs.grad] + [p.grad.clone() for p in bilm.lstm.parameters()])

    bilm.train()
    with concurrent_directions("off"):
        ref_out, ref_grads = run()
    with concurrent_directions("on"):
        out, grads = run()
    for a, b in zip(ref_out + ref_grads, out + grads, strict=True):
        torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-5 * float(a.abs().max()))


def test_a_forked_child_gets_workers_of_its_own():
    """Threads don't survive a fork: a child of a process that used the workers makes
    its own instead of waiting on the parent's."""
    def directions():
        return run_directions(lambda dirs: dirs.start, CPU)

    with concurrent_directions("on"):
        assert directions() == [0, 1]
        assert in_forked_child(directions, 60, "run_directions") == [0, 1]
