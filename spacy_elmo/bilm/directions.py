"""The forward and backward LSTM directions on two threads at once (CPU).

The two directions of a layer are independent until their outputs meet, but their per-step
products and elementwise ops are too small for one intra-op thread pool to split well over
cores. With `concurrent` on, each direction runs on a worker thread of its own with half of
the caller's intra-op threads (at least one), and the caller waits for both. Only the
threads' sharing changes, not the arithmetic: each direction runs the same ops on its own
slice of the stacked weights.

Modes: "auto" (the default: concurrent on CPU when the caller has two or more intra-op
threads), "on" (always on CPU; tests use it), "off".
"""

from __future__ import annotations

import os
import queue
import threading
from concurrent.futures import Future, wait
from contextlib import contextmanager
from typing import Callable, Iterator, List, Optional, Sequence, Tuple, TypeVar, cast

import torch

from ..errors import ElmoError, Errors
from .fork import guard_forks

MODES = ("auto", "on", "off")
BOTH = slice(0, 2)
EACH = (slice(0, 1), slice(1, 2))

T = TypeVar("T")
_mode = "auto"


def set_concurrent_directions(mode: str) -> None:
    """Set the process-wide mode: "auto", "on" or "off" (E160 for anything else)."""
    global _mode
    if mode not in MODES:
        raise ElmoError(Errors.E160.format(mode=mode, known=", ".join(MODES)))
    _mode = mode


@contextmanager
def concurrent_directions(mode: str) -> Iterator[None]:
    """The mode for the duration of a `with` block."""
    before = _mode
    set_concurrent_directions(mode)
    try:
        yield
    finally:
        set_concurrent_directions(before)


def use_concurrent(device: torch.device) -> bool:
    """Whether the directions of a layer on `device` run on two threads now. Never under
    autocast: it is set per thread, and the workers would run without it."""
    if device.type != "cpu" or _mode == "off" or torch.is_autocast_enabled(device.type):
        return False
    return _mode == "on" or torch.get_num_threads() >= 2


def run_directions(fn: Callable[[slice], T], device: torch.device) -> List[T]:
    """[fn(BOTH)] (the directions stacked, on the caller's thread), or, when concurrent,
    [fn(EACH[0]), fn(EACH[1])] on two worker threads at once. fn must only write to its
    own direction's slice of shared buffers."""
    if not use_concurrent(device):
        return [fn(BOTH)]
    guard_forks()
    return _workers().run([lambda: fn(EACH[0]), lambda: fn(EACH[1])])


def joined(parts: Sequence[Sequence[Optional[torch.Tensor]]]) -> List[Optional[torch.Tensor]]:
    """`run_directions`' results as one: each direction's tensors concatenated on the first
    axis (None stays None); a stacked run's own, uncopied."""
    if len(parts) == 1:
        return list(parts[0])
    return [None if pair[0] is None else torch.cat(cast(List[torch.Tensor], pair))
            for pair in zip(*parts, strict=True)]


class _Worker:
    """One daemon thread running submitted calls in order."""

    def __init__(self) -> None:
        self.tasks: queue.SimpleQueue[Tuple[Callable[[], object], Future]] = queue.SimpleQueue()
        threading.Thread(target=self._loop, name="spacy-elmo-direction", daemon=True).start()

    def submit(self, fn: Callable[[], T]) -> Future:
        future: Future = Future()
        self.tasks.put((fn, future))
        return future

    def _loop(self) -> None:
        while True:
            fn, future = self.tasks.get()
            try:
                future.set_result(fn())
            except BaseException as error:  # handed to the caller, who raises it
                future.set_exception(error)


class _Workers:
    """Two worker threads, each with its own intra-op thread count. Remade in a forked
    child (threads don't survive a fork)."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.lock = threading.Lock()
        self.workers = (_Worker(), _Worker())
        self.threads = 0

    def run(self, calls: List[Callable[[], T]]) -> List[T]:
        with self.lock:  # one layer at a time per process: the workers are shared
            self._set_threads(max(1, torch.get_num_threads() // 2))
            grad = torch.is_grad_enabled()
            inference = torch.is_inference_mode_enabled()

            def in_callers_modes(call: Callable[[], T]) -> Callable[[], T]:
                def run() -> T:  # grad and inference modes are per thread
                    with torch.inference_mode(inference), torch.set_grad_enabled(grad):
                        return call()
                return run

            futures = [worker.submit(in_callers_modes(call))
                       for worker, call in zip(self.workers, calls, strict=True)]
            wait(futures)  # both finish before either's error is raised
            return [f.result() for f in futures]

    def _set_threads(self, threads: int) -> None:
        """Give each worker `threads` intra-op threads. torch.set_num_threads sets the
        calling thread's count and the count new threads start with, so the caller sets
        its own again afterwards."""
        if threads == self.threads:
            return
        mine = torch.get_num_threads()
        for future in [w.submit(lambda: _set_own_threads(threads)) for w in self.workers]:
            future.result()
        torch.set_num_threads(mine)
        self.threads = threads


def _set_own_threads(threads: int) -> None:
    """Set the calling thread's intra-op thread count. A thread's first
    torch.get_num_threads() sets its count to the process-wide one, so that comes first."""
    torch.get_num_threads()
    torch.set_num_threads(threads)


_pool: Optional[_Workers] = None
_pool_lock = threading.Lock()


def _workers() -> _Workers:
    global _pool
    with _pool_lock:
        if _pool is None or _pool.pid != os.getpid():
            _pool = _Workers()
        return _pool
