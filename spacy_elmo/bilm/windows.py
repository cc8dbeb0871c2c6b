"""Cover a long token sequence with overlapping windows, so no token sits at a cut."""

from __future__ import annotations

from typing import List, Tuple


def windows(n: int, size: int, context: int) -> List[Tuple[int, int, int, int]]:
    """(first, last, keep_start, keep_end) per window: tokens [first, last) run through the
    biLM, and the outputs of [keep_start, keep_end) are kept. The kept ranges tile [0, n) in
    steps of `size`; each window adds up to `context` tokens on either side. A sequence of at
    most `size` tokens (also an empty one) is one window."""
    if n <= size:
        return [(0, n, 0, n)]
    return [(max(0, start - context), min(n, start + size + context), start,
             min(n, start + size)) for start in range(0, n, size)]
