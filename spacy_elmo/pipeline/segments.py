"""Cut docs into the pieces that go through the biLM: sentences, or bounded windows."""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Sequence

import numpy as np
from spacy.tokens import Doc


@dataclass
class Segment:
    """The tokens of one biLM input: `doc` index, token positions and their texts."""

    doc: int
    positions: np.ndarray
    words: List[str]


def split_docs(docs: Sequence[Doc], max_tokens: int) -> List[Segment]:
    """Sentences when the docs have boundaries, else windows of at most `max_tokens`.

    Whitespace tokens are left out (the biLM was never trained on them; they get zero
    vectors), and sentences longer than `max_tokens` are cut into windows.
    """
    segments: List[Segment] = []
    for i, doc in enumerate(docs):
        if doc.has_annotation("SENT_START"):
            spans = [(sent.start, sent.end) for sent in doc.sents]
        else:
            spans = [(0, len(doc))]
        for start, end in spans:
            positions = [t.i for t in doc[start:end] if not t.is_space]
            for k in range(0, len(positions), max_tokens):
                chunk = np.asarray(positions[k : k + max_tokens], dtype=np.int64)
                segments.append(Segment(i, chunk, [doc[int(p)].text for p in chunk]))
    return segments


def length_batches(segments: Sequence[Segment], batch_size: int) -> List[List[int]]:
    """Indices of `segments`, grouped longest-first into batches of `batch_size`."""
    order = sorted(range(len(segments)), key=lambda i: -len(segments[i].words))
    return [order[k : k + batch_size] for k in range(0, len(order), batch_size)]
