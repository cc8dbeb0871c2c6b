"""`spacy-elmo widen`: a trained biLM with more LSTM cells, written as an export that
`pretrain --init-weights` trains on. Its outputs are checked to be the source's before
anything is written; the softmax and vocabulary beside the source are carried over."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional

import torch

from ..bilm.chars import batch_to_ids
from ..bilm.io.sources import bundled, locate
from ..bilm.io.weights import load_files
from ..bilm.model import BiLM
from ..bilm.widen import widen_lstm
from ..errors import ElmoError, Errors
from ..files import PathLike
from ..files.atomic import atomic_directory
from .export import check_export_target, read_softmax, write_export
from .memory import available_memory, human_size

# what the outputs are compared on: words, punctuation, odd Unicode and a long token
CHECK_SENTENCES: List[List[str]] = [
    ["The", "bank", "of", "the", "river", "flooded", "."],
    ["I", "ate", "an", "apple", ",", "not", "an", "Apple", "phone", "!"],
    ["我", "喜欢", "吃", "苹果", "。"],
    ["naïve", "café", "—", "e\u0301", "🙂", "x" * 60],
]
TOLERANCE = 1e-4  # of the largest output magnitude: fp32 sums in another order


@dataclass
class Widened:
    """What `widen` wrote and how far the outputs moved."""

    output: Path
    old_dim: int
    lstm_dim: int
    max_diff: float
    softmax: bool


def widen(source: Optional[PathLike], output: PathLike, lstm_dim: int, *,
          options: Optional[PathLike] = None, seed: int = 0, overwrite: bool = False,
          lang: str = "en") -> Widened:
    """Write `source` (anything `locate` reads; None: the biLM bundled for `lang`) widened
    to `lstm_dim` cells into `output` (written whole; an export there needs `overwrite`)."""
    directory = Path(output)
    if source is None:
        bundled(lang, where="command")  # a language without a bundled biLM: say --weights
    files = locate(source, options, lang=lang)
    check_export_target(directory, files.weights, overwrite=overwrite)
    bilm = load_files(files)
    check_memory(bilm, lstm_dim)
    wide = widen_lstm(bilm, lstm_dim, seed=seed)
    diff, limit = output_difference(bilm, wide)
    if not diff <= limit:
        raise ElmoError(Errors.E278.format(diff=diff, limit=limit, output=directory))
    softmax = read_softmax(files.weights, bilm.options.projection_dim)
    with atomic_directory(directory) as tmp:
        write_export(tmp, wide, softmax)
    return Widened(directory, bilm.options.lstm_dim, lstm_dim, diff, softmax is not None)


def check_memory(bilm: BiLM, lstm_dim: int) -> None:
    """E279 when the widened biLM cannot be built and checked in the memory available:
    its weights, their copy from the source, and the check's activations (about three
    times the weights). An `lstm_dim` that is no wider is left to `widen_lstm` (E277)."""
    options = bilm.options
    if isinstance(lstm_dim, bool) or not isinstance(lstm_dim, int) or (
            lstm_dim <= options.lstm_dim):
        return
    # each layer and direction: gates (4H) over input and projection (P each), biases, and
    # the projection (H x P); the rest of the biLM is unchanged
    lstm = lambda h: 2 * options.n_layers * h * (9 * options.projection_dim + 4)  # noqa: E731
    params = sum(p.numel() for p in bilm.parameters()) + lstm(lstm_dim) - lstm(options.lstm_dim)
    need, have = 3 * 4 * params, available_memory()
    if have is not None and need > have:
        raise ElmoError(Errors.E279.format(given=lstm_dim, params=params, need=human_size(need),
                                           have=human_size(have)))


def output_difference(bilm: BiLM, wide: BiLM) -> tuple[float, float]:
    """The largest difference between the two biLMs' layers on CHECK_SENTENCES, and the
    limit float rounding allows."""
    ids = batch_to_ids(CHECK_SENTENCES)
    with torch.no_grad():
        before, after = bilm(ids).layers, wide(ids).layers
    diff = float((before - after).abs().max())
    return diff, TOLERANCE * max(1.0, float(before.abs().max()))
