"""Pretraining settings: one dataclass, read from a JSON file and overridden by flags."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Dict, List, Optional

from ..bilm.options import BiLMOptions, preset
from ..errors import ElmoError, Errors

# Settings that fix the model or the data streams: a resumed run must keep them.
FROZEN_KEYS = ("options", "vocab_size", "min_count", "lang", "segmenter", "split_sentences",
               "max_sentence_tokens", "skip_pattern", "batch_size", "window", "train", "seed",
               "init_weights", "shuffle_buffer")
OPTIMIZERS = ("adagrad", "adam")
SCHEDULES = ("constant", "linear", "cosine", "inverse_sqrt")
PRECISIONS = ("fp32", "bf16")
LSTM_BACKWARDS = ("fused", "autograd")


@dataclass
class PretrainConfig:
    """Everything `spacy-elmo pretrain` needs; see docs in the CLI help."""

    train: List[str] = field(default_factory=list)
    dev: List[str] = field(default_factory=list)
    output: str = "runs/elmo"
    lang: str = "whitespace"
    segmenter: Optional[str] = None
    split_sentences: bool = True
    max_sentence_tokens: int = 200
    shuffle_buffer: int = 10_000
    skip_pattern: Optional[str] = None
    preset: str = "tiny"
    options: Dict[str, Any] = field(default_factory=dict)
    vocab: Optional[str] = None
    vocab_size: int = 50_000
    min_count: int = 1
    vocab_max_tokens: Optional[int] = None
    init_weights: Optional[str] = None
    init_options: Optional[str] = None
    batch_size: int = 128
    window: int = 20
    n_negatives: int = 8192
    dropout: float = 0.1
    optimizer: str = "adagrad"
    lr: float = 0.2
    lr_schedule: str = "constant"
    warmup_steps: int = 0
    clip_norm: float = 10.0
    sum_over_steps: bool = True
    max_steps: int = 10_000
    max_minutes: Optional[float] = None
    max_cpu_minutes: Optional[float] = None
    eval_every: int = 500
    dev_max_tokens: Optional[int] = 100_000
    log_every: int = 10
    checkpoint_every: int = 500
    checkpoint_minutes: Optional[float] = None
    snapshot_every: Optional[int] = None
    seed: int = 0
    threads: Optional[int] = None
    device: str = "auto"
    precision: str = "fp32"
    lstm_backward: str = "fused"

    def __post_init__(self) -> None:
        def check(ok: bool, key: str, what: str) -> None:
            if not ok:
                raise ElmoError(Errors.E112.format(key=key, what=what,
                                                   value=getattr(self, key)))

        for key in ("batch_size", "window", "n_negatives", "max_steps", "eval_every",
                    "log_every", "checkpoint_every", "max_sentence_tokens", "vocab_size"):
            check(isinstance(getattr(self, key), int) and getattr(self, key) > 0, key,
                  "a positive integer")
        check(self.snapshot_every is None or (isinstance(self.snapshot_every, int)
                                              and self.snapshot_every > 0),
              "snapshot_every", "a positive integer or null")
        check(isinstance(self.shuffle_buffer, int) and self.shuffle_buffer >= 0,
              "shuffle_buffer", "a non-negative integer (0: sentences in file order)")
        for key in ("max_minutes", "max_cpu_minutes"):
            value = getattr(self, key)
            check(value is None or (isinstance(value, (int, float))
                                    and not isinstance(value, bool) and value > 0),
                  key, "a positive number of minutes or null")
        check(0.0 <= self.dropout < 1.0, "dropout", "in [0, 1)")
        check(self.lr > 0, "lr", "positive")
        check(self.optimizer in OPTIMIZERS, "optimizer", f"one of {OPTIMIZERS}")
        check(self.lr_schedule in SCHEDULES, "lr_schedule", f"one of {SCHEDULES}")
        check(self.vocab_size > 3, "vocab_size", "more than 3")
        check(self.precision in PRECISIONS, "precision", f"one of {PRECISIONS}")
        check(self.lstm_backward in LSTM_BACKWARDS, "lstm_backward",
              f"one of {LSTM_BACKWARDS}")

    @classmethod
    def from_file(cls, path: Path, **overrides: Any) -> PretrainConfig:
        """Settings from a JSON file; non-None `overrides` (command-line flags) win."""
        if not path.exists():
            raise ElmoError(Errors.E001.format(path=path, cwd=Path.cwd()))
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
            raise ElmoError(Errors.E002.format(path=path, kind="a JSON config", err=err)
                            ) from err
        known = [f.name for f in fields(cls)]
        unknown = sorted(set(data) - set(known))
        if unknown:
            raise ElmoError(Errors.E111.format(path=path, keys=unknown, known=known))
        data.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**data)

    def bilm_options(self) -> BiLMOptions:
        """The model shape: the preset with the explicit `options` overrides."""
        changes = dict(self.options)
        if "filters" in changes:
            changes["filters"] = tuple(tuple(f) for f in changes["filters"])
        return preset(self.preset, **changes)

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)
