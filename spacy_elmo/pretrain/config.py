"""Pretraining settings, each declared once below (section, default, rule, help), read from a
`.cfg` file (or a run's own record of them) and overridden from the command line."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from ..bilm.lm import BiLanguageModel
from ..bilm.model import BiLM
from ..bilm.options import OPTION_RULES, PRESETS, BiLMOptions, preset
from ..bilm.precision import TRAINING_PRECISIONS
from ..errors import ElmoError, Errors
from ..files.json_io import read_json_object
from ..validation import (
    boolean,
    check_all,
    check_keys,
    choice,
    integer,
    mapping,
    number,
    random_seed,
    regex,
    string,
    strings,
    thread_count,
    torch_device,
)
from . import declaration
from .corpus import TextSettings
from .declaration import Override, setting

TEXT = TextSettings()  # the reading settings' defaults are TextSettings's own
DEFAULT_PRESET = "tiny"
OPTIMIZERS = ("adagrad", "adam", "lazyadam")
SCHEDULES = ("constant", "linear", "cosine", "inverse_sqrt")
LSTM_BACKWARDS = ("fused", "autograd")
# The names a command line's first argument is taken as the config file by (a .json one is
# refused, E250: JSON configs were spacy-elmo 0.1's)
CONFIG_SUFFIXES = (".cfg", ".json")
TEXT_KEYS = ("paths.train", "paths.dev")  # settings that name text files


@dataclass
class PretrainConfig:
    """Everything `spacy-elmo pretrain` needs (`spacy-elmo pretrain --help` lists it)."""

    # [paths]
    train: List[str] = setting(
        "paths", [], strings(), "Training text: files (.txt, .gz, .xz), globs or directories.",
        frozen=True)
    dev: List[str] = setting("paths", [], strings(), "Dev text for perplexity.")
    output: str = setting("paths", "runs/elmo", string(), "The run directory.",
                          flags=("--output", "-o"))
    vocab: Optional[str] = setting(
        "paths", None, string(optional=True),
        "Use this vocab.txt (one word a line) instead of counting one.")
    init_weights: Optional[str] = setting(
        "paths", None, string(optional=True),
        "Start from a biLM (domain adaptation): weights.hdf5, its directory, a URL or a "
        "published name such as allennlp/small; the model's shape is then its shape.",
        frozen=True)
    init_options: Optional[str] = setting(
        "paths", None, string(optional=True),
        "options.json of init_weights (default: the one beside it).")
    # [corpus]
    lang: str = setting(
        "corpus", TEXT.lang, string(),
        "spaCy language for tokenization ('en', 'zh', ...) or 'whitespace'.", frozen=True)
    segmenter: Optional[str] = setting(
        "corpus", TEXT.segmenter, string(optional=True),
        "Chinese word segmentation: char (null: the default) or jieba.", frozen=True)
    split_sentences: bool = setting(
        "corpus", TEXT.split_sentences, boolean(),
        "Split lines into sentences with a rule-based splitter.", frozen=True)
    max_sentence_tokens: int = setting(
        "corpus", TEXT.max_sentence_tokens, integer(1),
        "Cut longer sentences at this many tokens.", frozen=True)
    skip_pattern: Optional[str] = setting(
        "corpus", TEXT.skip_pattern, regex(optional=True),
        "Skip lines matching this regular expression (e.g. Wikipedia headings).",
        frozen=True)
    shuffle_buffer: int = setting(
        "corpus", 10_000, integer(0),
        "Draw sentences at random from a buffer of this many (0: in file order).",
        frozen=True)
    vocab_size: int = setting("corpus", 50_000, integer(4),
                              "Words in the softmax vocabulary (the most frequent).",
                              frozen=True)
    min_count: int = setting("corpus", 1, integer(1),
                             "Leave words seen fewer times out of the vocabulary.", frozen=True)
    vocab_max_tokens: Optional[int] = setting(
        "corpus", None, integer(1, optional=True),
        "Count the vocabulary on the first this many tokens (null: all).")
    dev_max_tokens: Optional[int] = setting(
        "corpus", 100_000, integer(1, optional=True),
        "Evaluate on the first this many dev tokens (null: all).")
    # [model]
    preset: Optional[str] = setting(
        "model", None, choice(sorted(PRESETS), optional=True),
        f"Model size: {', '.join(PRESETS)} (null: {DEFAULT_PRESET}; with init_weights, "
        "leave it null: the shape is the weights').")
    options: Dict[str, Any] = setting(
        "model", {}, mapping(),
        'Overrides of the preset\'s biLM options, e.g. {"lstm_dim": 512} (in a .cfg file the '
        "section [model.options]).", frozen=True)
    dropout: float = setting("model", 0.1, number(0, 1, high_open=True), "Dropout.")
    n_negatives: int = setting("model", 8192, integer(1),
                               "Negatives drawn for the sampled softmax.")
    # [optimizer]
    optimizer: str = setting(
        "optimizer", "adagrad", choice(OPTIMIZERS),
        "adagrad, adam or lazyadam (Adam whose softmax rows move only when sampled).")
    lr: float = setting("optimizer", 0.2, number(0, low_open=True), "Learning rate.")
    lr_schedule: str = setting("optimizer", "constant", choice(SCHEDULES),
                               "Learning-rate schedule after the warmup.")
    warmup_steps: int = setting("optimizer", 0, integer(0),
                                "Raise the learning rate linearly over this many steps.")
    clip_norm: float = setting("optimizer", 10.0, number(0, low_open=True),
                               "Clip the global gradient norm at this value.")
    # [training]
    batch_size: int = setting("training", 128, integer(1),
                              "Rows (parallel sentence streams) per process.", frozen=True)
    window: int = setting("training", 20, integer(1),
                          "Tokens per truncated-backprop window.", frozen=True)
    sum_over_steps: bool = setting(
        "training", True, boolean(),
        "The gradient of the loss summed over a window's steps (bilm-tf), not its mean.")
    state_reset: float = setting(
        "training", 0.0, number(0, 1),
        "Probability that a row's carried LSTM state is zeroed before a window.")
    max_steps: int = setting("training", 10_000, integer(1), "Stop after this step.")
    max_minutes: Optional[float] = setting(
        "training", None, number(0, low_open=True, optional=True),
        "Also stop (evaluate, checkpoint, export) after this many minutes of training "
        "steps, summed over resumes.")
    max_cpu_minutes: Optional[float] = setting(
        "training", None, number(0, low_open=True, optional=True),
        "The same for the process's CPU time (all threads).")
    eval_every: int = setting("training", 500, integer(1), "Dev evaluation interval (steps).")
    log_every: int = setting("training", 10, integer(1), "Metrics interval (steps).")
    checkpoint_every: int = setting("training", 500, integer(1),
                                    "Checkpoint interval (steps).")
    checkpoint_minutes: Optional[float] = setting(
        "training", None, number(0, low_open=True, optional=True),
        "Also checkpoint after this many minutes.")
    snapshot_every: Optional[int] = setting(
        "training", None, integer(1, optional=True),
        "Also export the model to OUTPUT/snapshots/step_N/ (with its dev perplexity) every N "
        "steps.")
    seed: int = setting("training", 0, random_seed(), "Random seed.", frozen=True)
    # [system]
    threads: Optional[int] = setting("system", None, thread_count(optional=True),
                                     "torch CPU threads (null: torch's default).")
    device: str = setting(
        "system", "auto", torch_device(),
        "cpu, cuda, cuda:N or auto (a GPU if there is one); on the command line --gpu-id N "
        "(-1: the CPU).", flags=())
    precision: str = setting(
        "system", "fp32", choice(TRAINING_PRECISIONS),
        "fp32 or bf16 (bf16 matmuls over fp32 master weights; only where bf16 is native: "
        "CPUs with AVX512-BF16 or AMX, GPUs from Ampere).")
    lstm_backward: str = setting(
        "system", "fused", choice(LSTM_BACKWARDS),
        "fused (a hand-written LSTM backward) or autograd (the reference).")

    def __post_init__(self) -> None:
        check_all(self.__dict__, {s.name: s.rule for s in declaration.declared(PretrainConfig)},
                  Errors.E112)
        check_keys(list(self.options), list(OPTION_RULES), "'options' (the biLM options)")
        self.bilm_options()  # checks the option values now, before anything is written

    @classmethod
    def from_file(cls, path: Union[str, Path], **overrides: Any) -> PretrainConfig:
        """Settings from a `.cfg` file; non-None `overrides` (by attribute name, as
        command-line flags) win."""
        paths = {k: declaration.by_name(cls)[k].path for k in overrides}
        return cls.load(path, [(paths[k], v, f"--{paths[k]}") for k, v in overrides.items()
                               if v is not None])

    @classmethod
    def load(cls, path: Optional[Union[str, Path]], overrides: Sequence[Override] = ()
             ) -> PretrainConfig:
        """The defaults, then the `.cfg` file's sections, then `overrides` (`section.key`,
        value, the flag as written, for errors) in order, then `${...}` interpolation. A
        JSON file is refused (E250)."""
        if path is None:
            return cls._resolve({}, "<defaults>", overrides)
        if Path(path).suffix == ".json":
            raise ElmoError(Errors.E250.format(path=path))
        nested = declaration.read_cfg(Path(path))
        declaration.flatten(cls, nested, str(path))  # unknown keys, before any override
        return cls._resolve(nested, str(path), overrides, interpolate=True)

    @classmethod
    def from_record(cls, path: Union[str, Path], overrides: Sequence[Override] = ()
                    ) -> PretrainConfig:
        """The settings a run recorded in its config.json (written by the trainer, flat as
        `to_dict` gives them, JSON as the run's other records), then `overrides`: what
        `pretrain --resume` continues with when no config file is given."""
        data = read_json_object(Path(path), "a pretraining run's config.json")
        return cls._resolve(declaration.nest(cls, data, str(path)), str(path), overrides)

    @classmethod
    def _resolve(cls, nested: Dict[str, Any], source: str, overrides: Sequence[Override],
                 *, interpolate: bool = False) -> PretrainConfig:
        for key, value, flag in overrides:
            declaration.set_path(cls, nested, key, value, flag)
        if interpolate:
            nested = declaration.interpolate(nested, source)
        return cls(**declaration.flatten(cls, nested, source))

    def text_settings(self) -> TextSettings:
        """How the run turns raw lines into sentences."""
        return TextSettings(lang=self.lang, segmenter=self.segmenter,
                            split_sentences=self.split_sentences,
                            max_sentence_tokens=self.max_sentence_tokens,
                            skip_pattern=self.skip_pattern)

    def language_model(self, bilm: BiLM, n_vocab: int) -> BiLanguageModel:
        """The language model this run trains over `bilm` (its negatives and dropout)."""
        return BiLanguageModel(bilm, n_vocab, n_negatives=self.n_negatives,
                               dropout=self.dropout)

    def bilm_options(self) -> BiLMOptions:
        """The model shape: the preset (tiny when none) with the explicit `options`."""
        return preset(self.preset or DEFAULT_PRESET, **self.options)

    def check_init_shape(self, found: BiLMOptions) -> None:
        """With init_weights the shape is the weights': a preset or options asking for
        another one are refused (E104 names an option, E128 the preset)."""
        for key, given in self.options.items():
            value = getattr(found, key, None)
            if key == "filters":
                given = tuple(tuple(f) for f in given)
            if value != given:
                raise ElmoError(Errors.E104.format(key=key, given=given, found=value))
        if self.preset is not None:
            asked = self.bilm_options().as_dict()
            have = found.as_dict()
            differ = [f"{k} {asked[k]!r} vs {have[k]!r}" for k in OPTION_RULES
                      if asked[k] != have[k]]
            if differ:
                raise ElmoError(Errors.E128.format(preset=self.preset, path=self.init_weights,
                                                   differ="; ".join(differ)))

    def check_resume_step(self, step: int) -> None:
        """A resumed run must have steps left to train (or be exactly at max_steps, which
        re-exports it); one already past max_steps is refused (E129)."""
        if step > self.max_steps:
            raise ElmoError(Errors.E129.format(path=self.output, step=step,
                                               given=self.max_steps))

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)

    def to_cfg(self) -> str:
        """These settings as a `.cfg` file."""
        return declaration.cfg_text(PretrainConfig, self.to_dict())


# Settings that fix the model or the data streams: a resumed run must keep them.
FROZEN_KEYS = tuple(s.name for s in declaration.declared(PretrainConfig) if s.frozen)


def read_command_line(args: Sequence[str]) -> Tuple[Optional[Path], List[Override]]:
    """`spacy-elmo pretrain`'s arguments: the config file (a first positional argument named
    .cfg, or .json to refuse it; not a directory) and the overrides in order
    (`declaration.parse_command_line`), the other positionals (TEXT) first in paths.train."""
    gone = next((a for a in args if a.partition("=")[0] in ("--config", "-c")), None)
    if gone is not None:
        raise ElmoError(Errors.E252.format(flag=gone.partition("=")[0]))
    positionals, overrides = declaration.parse_command_line(PretrainConfig, args)
    path: Optional[Path] = None
    if positionals and positionals[0].lower().endswith(CONFIG_SUFFIXES) and not Path(
            positionals[0]).is_dir():  # a config file, even a missing one (then its error)
        path = Path(positionals.pop(0))
    texts = [*positionals, *(v for key, value, _ in overrides if key in TEXT_KEYS
                             and isinstance(value, list) for v in value)]
    misplaced = next((p for p in texts if isinstance(p, str)
                      and p.lower().endswith(CONFIG_SUFFIXES) and not Path(p).is_dir()), None)
    if misplaced is not None:
        raise ElmoError(Errors.E253.format(path=misplaced))
    if positionals:  # TEXT: training text, before any given with --train
        train = next((value for key, value, _ in overrides if key == "paths.train"), None)
        if train is None:
            overrides.append(("paths.train", positionals, "TEXT"))
        else:
            train[:0] = positionals
    return path, overrides


def settings_table() -> str:
    """docs/pretrain_settings.md: every pretraining setting."""
    return declaration.markdown_table(PretrainConfig, [
        "# Pretraining settings",
        "",
        "<!-- Generated from spacy_elmo/pretrain/config.py by "
        "spacy_elmo.pretrain.config.settings_table(); tests/pretrain/test_config.py checks "
        "it. -->",
        "",
        "Each setting lives in a section of the pretraining config "
        "(`spacy-elmo pretrain CONFIG.cfg`; `spacy-elmo init-pretrain-config` writes one) "
        "and can be overridden on the command line as `--section.key VALUE` or with its "
        "shortcut flag. Settings marked \"Kept on resume\" must stay the same when a run is "
        "resumed."])


def default_settings(*, preset_name: Optional[str] = None, lang: Optional[str] = None
                     ) -> PretrainConfig:
    """The defaults, with a preset and a language (for `init-pretrain-config`)."""
    changes: Dict[str, Any] = {"preset": preset_name}
    if lang is not None:
        changes["lang"] = lang
    return PretrainConfig(**changes)
