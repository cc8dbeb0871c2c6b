"""Cut docs into the pieces that go through the biLM: sentences, or bounded windows."""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Sequence

import numpy as np
from spacy.tokens import Doc

from ..bilm.windows import windows


@dataclass
class Segment:
    """One biLM input: the texts of `words`, of which `words[start:end]` are kept and
    written to the tokens at `positions` of doc number `doc` (the rest is context)."""

    doc: int
    positions: np.ndarray
    words: List[str]
    start: int
    end: int


def split_docs(docs: Sequence[Doc], max_tokens: int) -> List[Segment]:
    """Sentences when the docs have boundaries, else the whole doc; pieces longer than
    `max_tokens` become windows of `max_tokens` with `max_tokens // 4` tokens of context
    on each side (overlapping, so no token sits at an artificial sentence edge).

    Whitespace tokens are left out (the biLM was never trained on them; they get zero
    vectors).
    """
    context = max_tokens // 4
    segments: List[Segment] = []
    for i, doc in enumerate(docs):
        if doc.has_annotation("SENT_START"):
            spans = [(sent.start, sent.end) for sent in doc.sents]
        else:
            spans = [(0, len(doc))]
        for span_start, span_end in spans:
            positions = [t.i for t in doc[span_start:span_end] if not t.is_space]
            if not positions:
                continue
            texts = [doc[p].text for p in positions]
            for first, last, keep_start, keep_end in windows(len(positions), max_tokens,
                                                             context):
                segments.append(Segment(
                    i, np.asarray(positions[keep_start:keep_end], dtype=np.int64),
                    texts[first:last], keep_start - first, keep_end - first))
    return segments


def length_batches(segments: Sequence[Segment], batch_size: int) -> List[List[int]]:
    """Indices of `segments`, grouped longest-first into batches of `batch_size`."""
    order = sorted(range(len(segments)), key=lambda i: -len(segments[i].words))
    return [order[k : k + batch_size] for k in range(0, len(order), batch_size)]
