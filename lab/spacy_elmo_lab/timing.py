"""Timing for the benchmarks: the best of several runs (the least disturbed by other load)."""

from __future__ import annotations

import time
from typing import Callable


def best_time(fn: Callable[[], object], repeats: int) -> float:
    """The shortest of `repeats` timed calls of fn, in seconds."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)
