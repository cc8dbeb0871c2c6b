"""The biLM's hyper-parameters, read from and written to the bilm-tf `options.json` layout."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from ..errors import ElmoError, Errors, Warnings, warn
from ..files import PathLike
from ..files.json_io import read_json_object, write_json
from ..files.names import OPTIONS_NAME
from ..validation import (
    Rule,
    boolean,
    check,
    check_all,
    check_keys,
    choice,
    integer,
    is_int,
    number,
)

VOCABULARIES = ("bytes", "dictionary")
PUBLISHED_FILTERS: List[Tuple[int, int]] = [
    (1, 32), (2, 32), (3, 64), (4, 128), (5, 256), (6, 512), (7, 1024)
]


def _filter_pairs(value: Any) -> bool:
    return (isinstance(value, (list, tuple)) and len(value) > 0
            and all(isinstance(f, (list, tuple)) and len(f) == 2
                    and all(is_int(x) and x > 0 for x in f) for f in value))


# characters a token may have in the character CNN's input (bilm-tf and ELMoForManyLangs use
# 50): each token's row of ids is this long, so a much larger value only exhausts memory
MAX_CHARACTERS = 1024
OPTION_RULES: Dict[str, Rule] = {
    "lstm_dim": integer(1), "projection_dim": integer(1), "n_layers": integer(1),
    "cell_clip": number(0, low_open=True, optional=True),
    "proj_clip": number(0, low_open=True, optional=True),
    "use_skip_connections": boolean(), "char_embed_dim": integer(1),
    "filters": Rule("a non-empty list of [width, n_filters] pairs of positive integers",
                    _filter_pairs, "list"),
    "n_highway": integer(0), "activation": choice(("relu", "tanh")),
    "max_characters_per_token": integer(3, MAX_CHARACTERS), "n_characters": integer(1),
    "char_vocabulary": choice(VOCABULARIES), "word_dim": integer(0), "n_words": integer(0),
    "forget_bias": number(),
}
# Errors name each option as `--options`/presets spell it and where options.json has it.
JSON_KEYS = {key: f"{key} ({path})" for key, path in (
    ("lstm_dim", "lstm.dim"), ("projection_dim", "lstm.projection_dim"),
    ("n_layers", "lstm.n_layers"), ("cell_clip", "lstm.cell_clip"),
    ("proj_clip", "lstm.proj_clip"), ("use_skip_connections", "lstm.use_skip_connections"),
    ("char_embed_dim", "char_cnn.embedding.dim"), ("filters", "char_cnn.filters"),
    ("n_highway", "char_cnn.n_highway"), ("activation", "char_cnn.activation"),
    ("max_characters_per_token", "char_cnn.max_characters_per_token"),
    ("n_characters", "char_cnn.n_characters"), ("char_vocabulary", "char_cnn.vocabulary"),
    ("word_dim", "word_embedding.dim"), ("n_words", "word_embedding.n_words"),
    ("forget_bias", "lstm.forget_bias"))}


@dataclass(frozen=True)
class BiLMOptions:
    """Everything that fixes the shapes and the maths of a biLM."""

    lstm_dim: int = 4096
    projection_dim: int = 512
    n_layers: int = 2
    cell_clip: Optional[float] = 3.0  # None: no clipping
    proj_clip: Optional[float] = 3.0
    use_skip_connections: bool = True
    char_embed_dim: int = 16
    filters: Tuple[Tuple[int, int], ...] = tuple(PUBLISHED_FILTERS)
    n_highway: int = 2
    activation: str = "relu"
    max_characters_per_token: int = 50
    n_characters: int = 262
    # Variant of ELMoForManyLangs models: characters from a dictionary (n_characters rows,
    # row 0 unused), a word embedding beside the char CNN (n_words rows, row 0 unused), and
    # an LSTM without TensorFlow's constant forget-gate bias.
    char_vocabulary: str = "bytes"
    word_dim: int = 0
    n_words: int = 0
    forget_bias: float = 1.0
    extra: Dict[str, Any] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        check_all(self.__dict__, OPTION_RULES, Errors.E007, JSON_KEYS)
        object.__setattr__(self, "filters", tuple(tuple(f) for f in self.filters))
        max_width = max(w for w, _ in self.filters)
        check(JSON_KEYS["max_characters_per_token"], self.max_characters_per_token,
              integer(max(3, max_width), MAX_CHARACTERS), Errors.E007)
        if self.char_vocabulary == "bytes" and self.n_characters not in (261, 262):
            raise ElmoError(Errors.E006.format(value=self.n_characters))
        if self.char_vocabulary == "dictionary":
            check(JSON_KEYS["n_characters"], self.n_characters, integer(2), Errors.E007)
        else:
            check(JSON_KEYS["word_dim"], self.word_dim, Rule(
                "0 (a word embedding needs a dictionary vocabulary)", lambda v: v == 0),
                Errors.E007)
        if self.word_dim:
            check(JSON_KEYS["n_words"], self.n_words, integer(2), Errors.E007)

    @property
    def n_filters(self) -> int:
        return sum(n for _, n in self.filters)

    @property
    def output_dim(self) -> int:
        """Width of every output layer (forward and backward halves concatenated)."""
        return 2 * self.projection_dim

    @property
    def n_output_layers(self) -> int:
        """L + 1: the token layer and one per LSTM layer."""
        return self.n_layers + 1

    def to_json_dict(self) -> Dict[str, Any]:
        """The bilm-tf `options.json` layout (n_characters 262 for byte characters); the
        dictionary variant's keys are written only when they differ from bilm-tf's."""
        data: Dict[str, Any] = dict(self.extra)
        data["lstm"] = {
            "dim": self.lstm_dim,
            "projection_dim": self.projection_dim,
            "n_layers": self.n_layers,
            "cell_clip": self.cell_clip,
            "proj_clip": self.proj_clip,
            "use_skip_connections": self.use_skip_connections,
        }
        data["char_cnn"] = {
            "activation": self.activation,
            "embedding": {"dim": self.char_embed_dim},
            "filters": [list(f) for f in self.filters],
            "max_characters_per_token": self.max_characters_per_token,
            "n_characters": 262 if self.char_vocabulary == "bytes" else self.n_characters,
            "n_highway": self.n_highway,
        }
        if self.char_vocabulary != "bytes":
            data["char_cnn"]["vocabulary"] = self.char_vocabulary
        if self.word_dim:
            data["word_embedding"] = {"dim": self.word_dim, "n_words": self.n_words}
        if self.forget_bias != 1.0:
            data["lstm"]["forget_bias"] = self.forget_bias
        return data

    @classmethod
    def from_json_dict(cls, data: Dict[str, Any], source: str = "<options>") -> BiLMOptions:
        def get(section: str, key: str, default: Any = ...) -> Any:
            sec = data.get(section)
            if not isinstance(sec, dict) or key not in sec:
                if default is not ...:
                    return default
                raise ElmoError(Errors.E005.format(path=source, key=f"{section}.{key}"))
            return sec[key]

        n_characters = get("char_cnn", "n_characters", 262)
        vocabulary = get("char_cnn", "vocabulary", "bytes")
        words = data.get("word_embedding")
        words = words if isinstance(words, dict) else {}
        if vocabulary == "bytes" and n_characters == 261:
            warn(Warnings.W001, stacklevel=2)
            n_characters = 262
        embedding = get("char_cnn", "embedding")
        if not isinstance(embedding, dict) or "dim" not in embedding:
            raise ElmoError(Errors.E005.format(path=source, key="char_cnn.embedding.dim"))
        extra = {k: v for k, v in data.items()
                 if k not in ("lstm", "char_cnn", "word_embedding")}
        return cls(
            lstm_dim=get("lstm", "dim"),
            projection_dim=get("lstm", "projection_dim"),
            n_layers=get("lstm", "n_layers"),
            cell_clip=get("lstm", "cell_clip", None),
            proj_clip=get("lstm", "proj_clip", None),
            use_skip_connections=get("lstm", "use_skip_connections", False),
            char_embed_dim=embedding["dim"],
            filters=get("char_cnn", "filters"),
            n_highway=get("char_cnn", "n_highway"),
            activation=get("char_cnn", "activation", "relu"),
            max_characters_per_token=get("char_cnn", "max_characters_per_token", 50),
            n_characters=n_characters,
            char_vocabulary=vocabulary,
            word_dim=words.get("dim", 0),
            n_words=words.get("n_words", 0),
            forget_bias=get("lstm", "forget_bias", 1.0),
            extra=extra,
        )

    @classmethod
    def from_file(cls, path: PathLike) -> BiLMOptions:
        path = Path(path)
        if path.is_dir():
            if not (path / OPTIONS_NAME).exists():
                raise ElmoError(Errors.E008.format(path=path, name=OPTIONS_NAME))
            path = path / OPTIONS_NAME
        data = read_json_object(path, "JSON options")
        return cls.from_json_dict(data, source=str(path))

    def to_file(self, path: PathLike) -> None:
        write_json(Path(path), self.to_json_dict())

    def replace(self, **changes: Any) -> BiLMOptions:
        """A copy with some options changed (unknown keys are an error)."""
        check_keys(list(changes), list(OPTION_RULES), "the biLM options")
        return replace(self, **changes)

    def as_dict(self) -> Dict[str, Any]:
        return asdict(self)


PRESETS: Dict[str, BiLMOptions] = {
    "tiny": BiLMOptions(lstm_dim=256, projection_dim=64, n_highway=1, char_embed_dim=8,
                        filters=((1, 16), (2, 16), (3, 32), (4, 64), (5, 128))),
    "small": BiLMOptions(lstm_dim=1024, projection_dim=128, n_highway=1),
    "medium": BiLMOptions(lstm_dim=2048, projection_dim=256, n_highway=1),
    "original": BiLMOptions(lstm_dim=4096, projection_dim=512, n_highway=2),
}


def preset(name: str, **changes: Any) -> BiLMOptions:
    """Options of a named model size (`tiny`, `small`, `medium`, `original`)."""
    if name not in PRESETS:
        raise ElmoError(Errors.E012.format(value=name, name="preset", choices=sorted(PRESETS)))
    return PRESETS[name].replace(**changes) if changes else PRESETS[name]
