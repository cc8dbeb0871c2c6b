"""What the benchmarks share: the best of several timed runs (the least disturbed by other
load), and sentences of real news text from the AllenNLP fixture in the checkout."""

from __future__ import annotations

import json
import random
import time
from pathlib import Path
from typing import Callable, List

FIXTURE = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "allennlp_elmo"


def best_time(fn: Callable[[], object], repeats: int) -> float:
    """The shortest of `repeats` timed calls of fn, in seconds."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def make_sentences(n: int, seed: int = 0) -> List[List[str]]:
    """`n` sentences of 10-30 tokens cut from the fixture's news text, in order."""
    groups = json.loads((FIXTURE / "sentences.json").read_text(encoding="utf-8"))
    tokens = [t for group in groups for line in group for t in line.split()]
    rng = random.Random(seed)
    sentences, start = [], 0
    for _ in range(n):
        length = rng.randint(10, 30)
        if start + length > len(tokens):
            start = 0
        sentences.append(tokens[start : start + length])
        start += length
    return sentences
