"""The run-time settings of an ElmoModel, in one object: how it batches and windows docs,
its caches, the biLM's dropout and inference precision. Built from the config, never read
from saved data (a loaded pipeline runs as its config says), and applied to a biLM once,
where one comes in (`set_bilm`, loading) or the settings change (`configure`, as `serve`
does), not per call (a call only compares them with the biLM's: another model may share
it). `embed` and `serve` build their Embedder from one."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from ..bilm import BiLM, WordCache
from ..bilm.embedder import Embedder
from ..bilm.precision import check_precision_name
from ..bilm.windows import BATCH_SIZE, MAX_BATCH_TOKENS, WINDOW, WORD_CACHE
from ..errors import Errors
from ..validation import check_all, integer, number

RULES = {"batch_size": integer(1), "max_batch_tokens": integer(1), "window": integer(1),
         "word_cache_size": integer(0), "output_cache_mb": number(0),
         "dropout": number(0, 1, high_open=True)}
# The config's name of each setting where it differs (ElmoModel.v1's signature stays).
CONFIG_NAMES = {"window": "max_sentence_tokens"}


@dataclass(frozen=True)
class ElmoSettings:
    """batch_size, max_batch_tokens: the most windows, and rows x padded tokens, per biLM
    call. window: longer sentences, and docs without sentence boundaries, run as
    overlapping windows of this many tokens (the config's `max_sentence_tokens`).
    word_cache_size: token-encoder outputs kept per distinct word (inference, exact).
    output_cache_mb: memory for outputs of a frozen biLM, kept across epochs.
    dropout: the biLM's own, used only when it is fine-tuned. precision: of inference
    (`bilm/precision.py`)."""

    batch_size: int = BATCH_SIZE
    max_batch_tokens: int = MAX_BATCH_TOKENS
    window: int = WINDOW
    word_cache_size: int = WORD_CACHE
    output_cache_mb: float = 0.0
    dropout: float = 0.0
    precision: str = "fp32"

    def __post_init__(self) -> None:
        values = {key: getattr(self, key) for key in RULES}
        check_all(values, RULES, Errors.E020,
                  {key: f"spacy-elmo.ElmoModel.v1 {CONFIG_NAMES.get(key, key)}"
                   for key in RULES})
        check_precision_name(self.precision)

    def replace(self, **changes: Any) -> ElmoSettings:
        """These settings with `changes` (checked as at build)."""
        return dataclasses.replace(self, **changes)

    def apply(self, bilm: BiLM) -> None:
        """Set the biLM's dropout, inference precision and word cache to these settings
        (nothing to do when it runs at them already); E150-E152 and E230 where this
        machine can't run the precision, before anything changes."""
        cache = 0 if bilm.word_cache is None else bilm.word_cache.max_entries
        if (bilm.dropout, bilm.precision, cache) == (
                self.dropout, self.precision, self.word_cache_size):
            return
        bilm.set_precision(self.precision)  # checked before it changes anything
        bilm.set_dropout(self.dropout)
        if cache != self.word_cache_size:
            bilm.word_cache = WordCache(self.word_cache_size) if self.word_cache_size else None

    def embedder(self, bilm: BiLM, **options: Any) -> Embedder:
        """An Embedder of `bilm` (`embed`, `serve`) that batches and windows as these
        settings say, with them applied to the biLM; `options`: the embedder's own
        (layers, stateful, context)."""
        self.apply(bilm)
        return Embedder(bilm, batch_size=self.batch_size, window=self.window,
                        max_batch_tokens=self.max_batch_tokens,
                        word_cache=self.word_cache_size, **options)
