"""Pretraining settings: one dataclass, read from a JSON file and overridden by flags."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Dict, List, Optional, Union

from ..bilm.options import OPTION_RULES, PRESETS, BiLMOptions, preset
from ..errors import ElmoError, Errors
from ..files import read_json_object
from ..validation import (
    Rule,
    boolean,
    check_all,
    check_keys,
    choice,
    integer,
    mapping,
    number,
    regex,
    string,
    strings,
    torch_device,
)
from .corpus import TextSettings

# Settings that fix the model or the data streams: a resumed run must keep them.
FROZEN_KEYS = ("options", "vocab_size", "min_count", "lang", "segmenter", "split_sentences",
               "max_sentence_tokens", "skip_pattern", "batch_size", "window", "train", "seed",
               "init_weights", "shuffle_buffer")
TEXT = TextSettings()  # the reading settings' defaults are TextSettings's own
OPTIMIZERS = ("adagrad", "adam", "lazyadam")
SCHEDULES = ("constant", "linear", "cosine", "inverse_sqrt")
PRECISIONS = ("fp32", "bf16")
LSTM_BACKWARDS = ("fused", "autograd")
SETTING_RULES: Dict[str, Rule] = {
    "train": strings(), "dev": strings(), "output": string(), "lang": string(),
    "segmenter": string(optional=True), "split_sentences": boolean(),
    "max_sentence_tokens": integer(1), "shuffle_buffer": integer(0),
    "skip_pattern": regex(optional=True), "preset": choice(sorted(PRESETS)),
    "options": mapping(), "vocab": string(optional=True), "vocab_size": integer(4),
    "min_count": integer(1), "vocab_max_tokens": integer(1, optional=True),
    "init_weights": string(optional=True), "init_options": string(optional=True),
    "batch_size": integer(1), "window": integer(1), "n_negatives": integer(1),
    "dropout": number(0, 1, high_open=True), "optimizer": choice(OPTIMIZERS),
    "lr": number(0, low_open=True), "lr_schedule": choice(SCHEDULES),
    "warmup_steps": integer(0), "clip_norm": number(0, low_open=True),
    "sum_over_steps": boolean(), "state_reset": number(0, 1), "max_steps": integer(1),
    "max_minutes": number(0, low_open=True, optional=True),
    "max_cpu_minutes": number(0, low_open=True, optional=True), "eval_every": integer(1),
    "dev_max_tokens": integer(1, optional=True), "log_every": integer(1),
    "checkpoint_every": integer(1), "checkpoint_minutes": number(0, low_open=True,
                                                                 optional=True),
    "snapshot_every": integer(1, optional=True), "seed": integer(),
    "threads": integer(1, optional=True), "device": torch_device(),
    "precision": choice(PRECISIONS), "lstm_backward": choice(LSTM_BACKWARDS),
}


@dataclass
class PretrainConfig:
    """Everything `spacy-elmo pretrain` needs; see docs in the CLI help."""

    train: List[str] = field(default_factory=list)
    dev: List[str] = field(default_factory=list)
    output: str = "runs/elmo"
    lang: str = TEXT.lang
    segmenter: Optional[str] = TEXT.segmenter
    split_sentences: bool = TEXT.split_sentences
    max_sentence_tokens: int = TEXT.max_sentence_tokens
    shuffle_buffer: int = 10_000
    skip_pattern: Optional[str] = TEXT.skip_pattern
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
    # probability that a row's carried LSTM state is zeroed before a window (see trainer)
    state_reset: float = 0.0
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
        check_all(self.__dict__, SETTING_RULES, Errors.E112)
        check_keys(list(self.options), list(OPTION_RULES), "'options' (the biLM options)")
        self.bilm_options()  # checks the option values now, before anything is written

    @classmethod
    def from_file(cls, path: Union[str, Path], **overrides: Any) -> PretrainConfig:
        """Settings from a JSON file; non-None `overrides` (command-line flags) win."""
        path = Path(path)
        data = read_json_object(path, "a JSON config")
        known = [f.name for f in fields(cls)]
        unknown = sorted(set(data) - set(known))
        if unknown:
            raise ElmoError(Errors.E111.format(path=path, keys=unknown, known=known))
        data.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**data)

    def text_settings(self) -> TextSettings:
        """How the run turns raw lines into sentences."""
        return TextSettings(lang=self.lang, segmenter=self.segmenter,
                            split_sentences=self.split_sentences,
                            max_sentence_tokens=self.max_sentence_tokens,
                            skip_pattern=self.skip_pattern)

    def bilm_options(self) -> BiLMOptions:
        """The model shape: the preset with the explicit `options` overrides."""
        return preset(self.preset, **self.options)

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)
