"""What goes through the biLM, and in which batches: long token sequences cut into overlapping
windows (so that no token sits at a cut), and windows grouped longest-first into batches
bounded in rows and padded tokens. The `elmo` component and `Embedder` both use it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

import numpy as np

BATCH_SIZE = 64  # rows (windows) per biLM call
MAX_BATCH_TOKENS = 8192  # rows x (longest row + <S>, </S>) per biLM call
# The defaults of the `elmo` component (ElmoModel.v1) and of `spacy-elmo embed`, declared
# once. WINDOW: longer sentences run as overlapping windows of this many tokens (a quarter of
# it as context either side), an approximation of the LSTM layers; on English Wikipedia lines
# (6.4M tokens) 200 leaves 2.4% of lines (8.7% of tokens) windowed where 100 left 22.7%
# (49%), at the same cost per token. WORD_CACHE: distinct words whose token-encoder output
# is kept (exact); on the same text 100,000 gives a 91.1% hit rate against 88.4% for
# 50,000 (23% fewer encoder runs), for at most 100,000 x projection_dim x 4 bytes (51 MB
# for the small biLM, 205 MB for the original).
WINDOW = 200
WORD_CACHE = 100_000


@dataclass
class Piece:
    """One row of a biLM batch: `words`, a window of sequence number `source`. The outputs
    of `words[start:end]` are kept (the rest is context); they belong at `targets` of the
    sequence's output (token positions in a doc, or in a sentence)."""

    source: int
    words: Sequence[str]
    start: int
    end: int
    targets: np.ndarray


def windows(n: int, size: int, context: int) -> List[Tuple[int, int, int, int]]:
    """(first, last, keep_start, keep_end) per window: tokens [first, last) run through the
    biLM, and the outputs of [keep_start, keep_end) are kept. The kept ranges tile [0, n) in
    steps of `size`; each window adds up to `context` tokens on either side. A sequence of at
    most `size` tokens (also an empty one) is one window."""
    if n <= size:
        return [(0, n, 0, n)]
    return [(max(0, start - context), min(n, start + size + context), start,
             min(n, start + size)) for start in range(0, n, size)]


def split(source: int, words: Sequence[str], targets: np.ndarray, size: int,
          context: Optional[int] = None) -> List[Piece]:
    """The pieces of one sequence: windows of `size` words with `context` words (default
    size // 4) on either side; `targets[i]` is where the output of `words[i]` belongs."""
    context = size // 4 if context is None else context
    return [Piece(source, words[first:last], keep_start - first, keep_end - first,
                  targets[keep_start:keep_end])
            for first, last, keep_start, keep_end in windows(len(words), size, context)]


def batches(pieces: Sequence[Piece], batch_size: int = BATCH_SIZE,
            max_batch_tokens: int = MAX_BATCH_TOKENS) -> List[List[Piece]]:
    """The pieces sorted longest first (ties in input order), in consecutive batches of at
    most `batch_size` rows and `max_batch_tokens` padded tokens (a longer piece still gets
    a batch of its own)."""
    result: List[List[Piece]] = []
    longest = 0
    for piece in sorted(pieces, key=lambda p: len(p.words), reverse=True):
        if not result or len(result[-1]) == batch_size or (
                (len(result[-1]) + 1) * (longest + 2) > max_batch_tokens):
            result.append([])
            longest = len(piece.words)
        result[-1].append(piece)
    return result
