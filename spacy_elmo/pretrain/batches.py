"""Windows of per-row sentence streams, turned into `LMBatch`es.

Every batch row is a stream of sentences framed `<S> w1 ... wn </S>`; the backward stream
holds the same sentences, each reversed (`</S> wn ... w1 <S>`), at the same positions. A
window feeds `window` tokens of each stream and predicts the token after each of them; its
last target becomes the first input of the next window (truncated backprop).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch

from ..bilm.chars import BOS_TOKEN, EOS_TOKEN, CharIds
from ..bilm.lm import LMBatch
from .corpus import SentenceSource
from .stopping import stop_point
from .vocab import Vocab


@dataclass
class RowBuffers:
    """The tokens of each row not yet consumed, forward and backward."""

    fwd: List[List[str]] = field(default_factory=list)
    bwd: List[List[str]] = field(default_factory=list)


def frame(sentence: Sequence[str]) -> Tuple[List[str], List[str]]:
    """The forward and the backward framing of one sentence."""
    return [BOS_TOKEN, *sentence, EOS_TOKEN], [EOS_TOKEN, *reversed(sentence), BOS_TOKEN]


class BatchMaker:
    """Token windows to tensors: unique char ids, positions and softmax targets."""

    def __init__(self, vocab: Vocab, max_characters_per_token: int) -> None:
        self.vocab = vocab
        self.char_ids = CharIds(max_characters_per_token)

    def make(self, inputs: Sequence[Sequence[Sequence[str]]],
             targets: Sequence[Sequence[Sequence[str]]], steps: int) -> LMBatch:
        """inputs/targets: [direction][row] token lists (a row may be shorter than steps)."""
        rows = len(inputs[0])
        positions: Dict[str, int] = {}
        index = np.full((2, rows, steps), -1, dtype=np.int64)
        target_ids = np.full((2, rows, steps), -1, dtype=np.int64)
        lengths = np.zeros(rows, dtype=np.int64)
        for d in range(2):
            for r in range(rows):
                tokens = inputs[d][r]
                lengths[r] = len(tokens)
                index[d, r, : len(tokens)] = [positions.setdefault(t, len(positions))
                                              for t in tokens]
                target_ids[d, r, : len(tokens)] = [self.vocab[t] for t in targets[d][r]]
        chars = np.stack([self.char_ids.token(t) for t in positions]) if positions else \
            np.zeros((0, self.char_ids.max_chars), dtype=np.int64)
        return LMBatch(torch.from_numpy(chars), torch.from_numpy(index),
                       torch.from_numpy(target_ids), torch.from_numpy(lengths))


class TrainStreams:
    """`rows` endless sentence streams fed by one source, cut into windows."""

    def __init__(self, source: SentenceSource, maker: BatchMaker, *, rows: int, window: int,
                 buffers: Optional[List[RowBuffers]] = None) -> None:
        self.source = source
        self.maker = maker
        self.window = window
        self.buffers = buffers if buffers is not None else [RowBuffers() for _ in range(rows)]

    def _fill(self, buf: RowBuffers) -> None:
        have = sum(len(chunk) for chunk in buf.fwd)
        while have < self.window + 1:
            stop_point()
            fwd, bwd = frame(self.source.next_sentence())
            buf.fwd.append(fwd)
            buf.bwd.append(bwd)
            have += len(fwd)

    def next_batch(self) -> LMBatch:
        inputs: List[List[List[str]]] = [[], []]
        targets: List[List[List[str]]] = [[], []]
        for buf in self.buffers:  # every row first: a stop while reading loses no token
            self._fill(buf)
        for buf in self.buffers:
            for d, chunks in enumerate((buf.fwd, buf.bwd)):
                tokens = take(chunks, self.window + 1)
                inputs[d].append(tokens[:-1])
                targets[d].append(tokens[1:])
        return self.maker.make(inputs, targets, self.window)


def take(chunks: List[List[str]], n: int) -> List[str]:
    """The first n tokens of the chunks; drops n - 1 of them, so that the last one taken
    starts the next window."""
    out: List[str] = []
    for chunk in chunks:
        out.extend(chunk[: n - len(out)])
        if len(out) == n:
            break
    drop = n - 1
    while drop:
        head = chunks[0]
        if len(head) <= drop:
            drop -= len(head)
            chunks.pop(0)
        else:
            chunks[0] = head[drop:]
            drop = 0
    return out


def dev_batches(sentences: Sequence[Sequence[str]], maker: BatchMaker, *, rows: int,
                window: int) -> List[LMBatch]:
    """Finite windows over the dev sentences, split into `rows` contiguous streams."""
    size = -(-len(sentences) // rows)
    per_row = [sentences[r * size : (r + 1) * size] for r in range(rows)]
    streams: List[Tuple[List[str], List[str]]] = []
    for row in per_row:
        fwd: List[str] = []
        bwd: List[str] = []
        for sentence in row:
            f, b = frame(sentence)
            fwd.extend(f)
            bwd.extend(b)
        streams.append((fwd, bwd))
    longest = max((len(f) for f, _ in streams), default=0)
    batches = []
    for start in range(0, max(longest - 1, 0), window):
        inputs: List[List[List[str]]] = [[], []]
        targets: List[List[List[str]]] = [[], []]
        for fwd, bwd in streams:
            for d, stream in enumerate((fwd, bwd)):
                end = min(start + window, len(stream) - 1)
                inputs[d].append(stream[start:end] if end > start else [])
                targets[d].append(stream[start + 1 : end + 1] if end > start else [])
        batches.append(maker.make(inputs, targets, window))
    return batches
