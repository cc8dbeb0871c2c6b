"""Read ELMoForManyLangs (EFML, HIT-SCIR) model directories into a `BiLM`.

A directory holds `config.json` (a run configuration whose `config_path` names the network
config), the network config, `char.dic` and `word.dic` (`<entry> TAB <id>` per line) and two
`torch.save`d state dicts, `token_embedder.pkl` and `encoder.pkl`, in PyTorch's legacy or zip
container. The state dicts are read with `torch.load(weights_only=True)`, which never runs
code from the file.

The model is this package's biLM in its dictionary variant (`char_vocabulary="dictionary"`,
word embeddings, `forget_bias=0`). Loading maps EFML's layout onto it, the same maths (results
agree to float32 rounding): gate blocks (i, f, g, o) become (i, g, f, o); a highway gate g
that keeps the input becomes this model's carry gate 1 - g = sigmoid(-z) by negating its
rows; clips of 0 (off) become None.

EFML's `Embedder` is stateful and shuffles its batches with Python's unseeded `random`;
`efml_batch_order` and `replay_stateful` reproduce a run of it exactly when the seed is known.
"""

from __future__ import annotations

import os
import random
import warnings
from pathlib import Path
from typing import (
    Any,
    Dict,
    Iterable,
    List,
    Mapping,
    NamedTuple,
    Optional,
    Sequence,
    Tuple,
    cast,
)

import numpy as np
import torch
from torch import nn

from ...errors import ElmoError, Errors, damaged, first_line
from ...files import PathLike, names
from ...files.json_io import read_json_object
from ...validation import check, integer
from ..dictionary import TokenDictionary, check_entries
from ..lstm import ProjectedLSTMLayer
from ..model import BiLM, StatefulBiLM
from ..options import BiLMOptions
from .finite import check_finite

SPACE_ENTRY = "\u3000"  # where EFML files an entry whose text was only whitespace

# The network config every released EFML model names: it ships with EFML's code, not with
# the models. Hyper-parameters only (its classifier and dropout are for training).
RELEASED_CONFIG_NAME = "cnn_50_100_512_4096_sample.json"
RELEASED_CONFIG: Dict[str, Any] = {
    "encoder": {"name": "elmo", "projection_dim": 512, "cell_clip": 3, "proj_clip": 3,
                "dim": 4096, "n_layers": 2},
    "token_embedder": {"name": "cnn", "activation": "relu",
                       "filters": [[1, 32], [2, 32], [3, 64], [4, 128], [5, 256], [6, 512],
                                   [7, 1024]],
                       "n_highway": 2, "word_dim": 100, "char_dim": 50,
                       "max_characters_per_token": 50},
}


def is_efml_dir(path: PathLike) -> bool:
    """A directory with at least one of the files of an EFML model."""
    path = Path(path)
    return path.is_dir() and any((path / name).exists() for name in names.EFML_FILES)


def is_efml_file(path: PathLike) -> bool:
    """One of the files of an EFML model directory (the directory is meant)."""
    path = Path(path)
    return path.is_file() and path.name in names.EFML_FILES and is_efml_dir(path.parent)


def read_network_config(directory: Path, network_config: Optional[PathLike] = None
                        ) -> Tuple[Dict[str, Any], str]:
    """The network config (parsed) and where it came from.

    `network_config` wins; otherwise `config.json`'s `config_path` is looked up as EFML does:
    relative to the model directory, then its file name in the model directory; the released
    models' config is built in."""
    if network_config is not None:
        path = Path(network_config)
        return read_json_object(path, "an EFML network config"), str(path)
    run_config = read_json_object(_required(directory, names.EFML_CONFIG, "the run configuration"),
                            "an EFML config.json")
    name = run_config.get("config_path")
    if not isinstance(name, str) or not name:
        raise ElmoError(Errors.E033.format(path=directory / names.EFML_CONFIG, key="config_path",
                                           what="the network config's file name",
                                           value=name))
    base = os.path.basename(name.replace("\\", "/"))
    tried = list(dict.fromkeys([directory / name, directory / base]))  # each path once
    for path in tried:
        if path.is_file():
            return read_json_object(path, "an EFML network config"), str(path)
    if base == RELEASED_CONFIG_NAME:
        return RELEASED_CONFIG, f"{RELEASED_CONFIG_NAME} (built in)"
    raise ElmoError(Errors.E032.format(config=directory / names.EFML_CONFIG, name=name,
                                       tried=", ".join(str(p) for p in tried)))


def _required(directory: Path, name: str, what: str) -> Path:
    path = directory / name
    if not path.is_file():
        raise ElmoError(Errors.E031.format(path=directory, name=name, what=what))
    return path


def efml_options(network: Dict[str, Any], source: str, n_characters: int, n_words: int
                 ) -> BiLMOptions:
    """BiLMOptions of the dictionary variant from an EFML network config and the sizes of
    its dictionaries (entries, without this model's extra row 0)."""

    def get(section: str, key: str, what: str, ok: Any) -> Any:
        sec = network.get(section)
        value = sec.get(key, "<missing>") if isinstance(sec, dict) else "<missing>"
        if value == "<missing>" or not ok(value):
            raise ElmoError(Errors.E033.format(path=source, key=f"{section}.{key}", what=what,
                                               value=value))
        return value

    def count(value: Any) -> bool:
        return isinstance(value, int) and not isinstance(value, bool) and value > 0

    def clip(value: Any) -> bool:
        return isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0

    get("encoder", "name", "'elmo' (the projected, clipped LSTM of the published models; "
        "other encoders are not supported)", lambda v: v == "elmo")
    get("token_embedder", "name", "'cnn' (the character CNN of the published models; other "
        "token embedders are not supported)", lambda v: v == "cnn")
    cell_clip = get("encoder", "cell_clip", "a number >= 0", clip)
    proj_clip = get("encoder", "proj_clip", "a number >= 0", clip)
    word_dim = get("token_embedder", "word_dim", "an integer >= 0",
                   lambda v: count(v) or v == 0)
    filters = get("token_embedder", "filters", "a list of [width, number of filters]",
                  lambda v: isinstance(v, list) and len(v) > 0 and all(
                      isinstance(f, list) and len(f) == 2 and count(f[0]) and count(f[1])
                      for f in v))
    return BiLMOptions(
        lstm_dim=get("encoder", "dim", "a positive integer", count),
        projection_dim=get("encoder", "projection_dim", "a positive integer", count),
        n_layers=get("encoder", "n_layers", "a positive integer", count),
        cell_clip=float(cell_clip) or None,  # EFML's 0 (off) is None here
        proj_clip=float(proj_clip) or None,
        use_skip_connections=True,
        char_embed_dim=get("token_embedder", "char_dim", "a positive integer (models "
                           "without a character CNN are not supported)", count),
        filters=tuple((int(w), int(n)) for w, n in filters),
        n_highway=get("token_embedder", "n_highway", "an integer >= 0",
                      lambda v: count(v) or v == 0),
        activation=get("token_embedder", "activation", "'relu' or 'tanh'",
                       lambda v: v in ("relu", "tanh")),
        max_characters_per_token=get("token_embedder", "max_characters_per_token",
                                     "a positive integer", count),
        n_characters=n_characters + 1,
        char_vocabulary="dictionary",
        word_dim=word_dim,
        n_words=n_words + 1 if word_dim else 0,
        forget_bias=0.0,
    )


def read_dictionary(path: Path) -> Tuple[str, ...]:
    """The entries of a `.dic` file in id order, read as EFML reads them: each line (Python's
    line boundaries) is stripped and split at TAB; a line left with one field was an entry
    made only of whitespace, which EFML files under U+3000. Later lines win."""
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as err:
        raise damaged(path, "an EFML dictionary (UTF-8)", err) from err
    except OSError as err:
        raise damaged(path, "an EFML dictionary", err) from err
    ids: Dict[str, int] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        fields = line.strip().split("\t")
        if len(fields) == 1:
            fields.insert(0, SPACE_ENTRY)
        try:
            if len(fields) != 2:
                raise ValueError
            ids[fields[0]] = int(fields[1])
        except ValueError:
            raise ElmoError(Errors.E034.format(line=number, path=path, text=line)) from None
    values = sorted(set(ids.values()))
    if values != list(range(len(ids))):
        raise ElmoError(Errors.E036.format(path=path, detail=(
            f"its {len(ids)} distinct entries have {len(values)} distinct ids"
            + (f" from {values[0]} to {values[-1]}" if values else ""))))
    entries = [""] * len(ids)
    for entry, i in ids.items():
        entries[i] = entry
    return tuple(entries)


def read_state_dict(path: Path, part: str, source: str) -> Dict[str, torch.Tensor]:
    """A state dict saved with `torch.save`, loaded without running code from the file
    (`source`: where the network config that describes it came from)."""
    try:
        with warnings.catch_warnings():  # e.g. about pickle protocols; the error says it all
            warnings.simplefilter("ignore")
            data = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # torch raises many kinds (UnpicklingError, RuntimeError, ...)
        raise ElmoError(Errors.E038.format(path=path, err=_explain(err))) from err
    if not isinstance(data, Mapping):
        raise ElmoError(Errors.E039.format(path=path, part=part, source=source, detail=(
            f"it holds a {type(data).__name__}, not a mapping of parameter names to tensors")))
    wrong = [k for k, v in data.items() if not isinstance(k, str)
             or not isinstance(v, torch.Tensor)]
    if wrong:
        raise ElmoError(Errors.E039.format(path=path, part=part, source=source, detail=(
            f"entries such as {wrong[0]!r} are not tensors named by strings")))
    check_finite(path, data)
    return dict(data)


def _explain(err: BaseException) -> str:
    """The gist of torch.load's error (not its advice to load unsafely)."""
    text = str(err)
    marker = "WeightsUnpickler error:"
    if marker in text:
        detail = text.split(marker, 1)[1].strip().splitlines()[0].split(" Please use")[0]
        return f"the safe loader refused it ({detail.strip().rstrip('.')})"
    return first_line(err)


def token_embedder_shapes(o: BiLMOptions) -> Dict[str, Tuple[int, ...]]:
    """Every tensor of `token_embedder.pkl` with its shape (rows of the dictionaries
    without this model's row 0)."""
    shapes: Dict[str, Tuple[int, ...]] = {}
    if o.word_dim:
        shapes["word_emb_layer.embedding.weight"] = (o.n_words - 1, o.word_dim)
    shapes["char_emb_layer.embedding.weight"] = (o.n_characters - 1, o.char_embed_dim)
    for j, (width, n) in enumerate(o.filters):
        shapes[f"convolutions.{j}.weight"] = (n, o.char_embed_dim, width)
        shapes[f"convolutions.{j}.bias"] = (n,)
    F = o.n_filters
    for k in range(o.n_highway):
        shapes[f"highways._layers.{k}.weight"] = (2 * F, F)
        shapes[f"highways._layers.{k}.bias"] = (2 * F,)
    shapes["projection.weight"] = (o.projection_dim, o.word_dim + F)
    shapes["projection.bias"] = (o.projection_dim,)
    return shapes


def encoder_shapes(o: BiLMOptions) -> Dict[str, Tuple[int, ...]]:
    """Every tensor of `encoder.pkl` with its shape."""
    C, P = o.lstm_dim, o.projection_dim
    shapes: Dict[str, Tuple[int, ...]] = {}
    for k in range(o.n_layers):
        for direction in ("forward", "backward"):
            prefix = f"{direction}_layer_{k}"
            shapes[f"{prefix}.input_linearity.weight"] = (4 * C, P)
            shapes[f"{prefix}.state_linearity.weight"] = (4 * C, P)
            shapes[f"{prefix}.state_linearity.bias"] = (4 * C,)
            shapes[f"{prefix}.state_projection.weight"] = (P, C)
    return shapes


def check_state(state: Dict[str, torch.Tensor], shapes: Dict[str, Tuple[int, ...]],
                path: Path, part: str, source: str, sizes: str) -> None:
    """Raise unless `state` has exactly the expected tensors and shapes (`source`: the
    network config's origin; `sizes`: what the shapes come from)."""
    missing = [k for k in shapes if k not in state]
    unexpected = [k for k in state if k not in shapes]
    if missing or unexpected:
        detail = "; ".join(f"{what} {_some(keys)}" for what, keys in (
            ("missing", missing), ("unexpected", unexpected)) if keys)
        raise ElmoError(Errors.E039.format(path=path, part=part, source=source,
                                           detail=detail))
    for name, shape in shapes.items():
        if tuple(state[name].shape) != shape:
            raise ElmoError(Errors.E040.format(name=name, path=path,
                                               found=tuple(state[name].shape),
                                               expected=shape, source=sizes))


def _some(keys: List[str], limit: int = 4) -> str:
    more = f" and {len(keys) - limit} more" if len(keys) > limit else ""
    return ", ".join(repr(k) for k in keys[:limit]) + more


def _gates(x: torch.Tensor) -> torch.Tensor:
    """EFML's gate blocks (i, f, g, o) on axis 0 -> this model's (i, g, f, o)."""
    i, f, g, o = x.chunk(4, dim=0)
    return torch.cat([i, g, f, o])


def load_state(bilm: BiLM, token_embedder: Dict[str, torch.Tensor],
               encoder: Dict[str, torch.Tensor]) -> None:
    """Copy checked EFML state dicts into a dictionary-variant BiLM (in place)."""
    enc = bilm.encoder
    F = bilm.options.n_filters
    with torch.no_grad():
        enc.char_embedding.weight[1:].copy_(token_embedder["char_emb_layer.embedding.weight"])
        if enc.word_embedding is not None:
            enc.word_embedding.weight[1:].copy_(
                token_embedder["word_emb_layer.embedding.weight"])
        for j, (weight, bias) in enumerate(zip(enc.conv_weights, enc.conv_biases, strict=True)):
            weight.copy_(token_embedder[f"convolutions.{j}.weight"])
            bias.copy_(token_embedder[f"convolutions.{j}.bias"])
        for k, hw in enumerate(cast(List[nn.Linear], list(enc.highways))):
            for ours, theirs in ((hw.weight, token_embedder[f"highways._layers.{k}.weight"]),
                                 (hw.bias, token_embedder[f"highways._layers.{k}.bias"])):
                ours[:F].copy_(theirs[:F])
                ours[F:].copy_(-theirs[F:])  # carry = 1 - gate = sigmoid(-z)
        enc.projection.weight.copy_(token_embedder["projection.weight"])
        enc.projection.bias.copy_(token_embedder["projection.bias"])
        for k, layer in enumerate(cast(List[ProjectedLSTMLayer], list(bilm.lstm.layers))):
            for d, direction in enumerate(("forward", "backward")):
                prefix = f"{direction}_layer_{k}"
                layer.w_input[d].copy_(_gates(encoder[f"{prefix}.input_linearity.weight"]).T)
                layer.w_hidden[d].copy_(_gates(encoder[f"{prefix}.state_linearity.weight"]).T)
                layer.bias[d].copy_(_gates(encoder[f"{prefix}.state_linearity.bias"]))
                layer.w_proj[d].copy_(encoder[f"{prefix}.state_projection.weight"].T)


class EfmlModel(NamedTuple):
    """What an EFML model directory holds, checked: options, dictionary, the state dict of
    each pickle (by file name), and where the network config came from."""

    options: BiLMOptions
    dictionary: TokenDictionary
    states: Dict[str, Dict[str, torch.Tensor]]
    network_config: str


def read_efml(directory: PathLike, network_config: Optional[PathLike] = None) -> EfmlModel:
    """Read and check every file of an EFML model directory (or of the directory of one of
    its files)."""
    directory = Path(directory)
    if is_efml_file(directory):
        directory = directory.parent
    if not directory.exists():
        raise ElmoError(Errors.E001.format(path=directory, cwd=Path.cwd()))
    if not directory.is_dir():
        raise ElmoError(Errors.E030.format(path=directory))
    network, source = read_network_config(directory, network_config)
    char_path = _required(directory, names.EFML_CHAR_DIC, "the character dictionary")
    chars = read_dictionary(char_path)
    check_entries("character", chars, str(char_path))
    tokens = network.get("token_embedder")
    word_dim = tokens.get("word_dim") if isinstance(tokens, dict) else None
    words: Tuple[str, ...] = ()
    if word_dim:
        word_path = _required(directory, names.EFML_WORD_DIC,
                              f"the word dictionary; the network config has word_dim {word_dim}")
        words = read_dictionary(word_path)
        check_entries("word", words, str(word_path))
    options = efml_options(network, source, len(chars), len(words))
    sizes = (f"the network config ({source}), {names.EFML_CHAR_DIC} ({len(chars)} entries)"
             + (f" and {names.EFML_WORD_DIC} ({len(words)} entries)" if words else ""))
    states: Dict[str, Dict[str, torch.Tensor]] = {}
    for name, part, shapes in ((names.EFML_TOKEN_EMBEDDER, "token embedder",
                                token_embedder_shapes(options)),
                               (names.EFML_ENCODER, "encoder", encoder_shapes(options))):
        path = _required(directory, name, f"the {part} weights")
        state = read_state_dict(path, part, source)
        check_state(state, shapes, path, part, source, sizes)
        states[name] = state
    return EfmlModel(options, TokenDictionary(chars, words), states, source)


def load_efml(directory: PathLike, network_config: Optional[PathLike] = None,
              word_cache_size: int = 0) -> BiLM:
    """A BiLM (dictionary variant, eval mode) with the weights of an EFML model directory.

    `network_config`: the network config JSON when the directory's config.json names one
    that is neither in the directory nor the released models' (built in)."""
    model = read_efml(directory, network_config)
    bilm = BiLM(model.options, word_cache_size=word_cache_size, dictionary=model.dictionary)
    load_state(bilm, model.states[names.EFML_TOKEN_EMBEDDER], model.states[names.EFML_ENCODER])
    return bilm.eval()


def efml_batch_order(lengths: Sequence[int], batch_size: int,
                     rng: Optional[random.Random] = None) -> List[List[int]]:
    """The batches EFML's `sents2elmo` forms (sentence indices, row order inside), in the
    order it runs them: sentences sorted longest first (ties keep input order), cut into runs
    of `batch_size`, the list of runs shuffled once with `rng.shuffle`. EFML uses Python's
    global `random` unseeded; `random.Random(seed)` gives its order after `random.seed(seed)`.
    Without `rng`, the runs stay in sorted order."""
    check("batch_size", batch_size, integer(1))
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    batches = [order[k : k + batch_size] for k in range(0, len(order), batch_size)]
    perm = list(range(len(batches)))
    if rng is not None:
        rng.shuffle(perm)
    return [batches[p] for p in perm]


def replay_stateful(bilm: BiLM, sentences: Sequence[Sequence[str]],
                    batches: Iterable[Sequence[int]]) -> List[np.ndarray]:
    """EFML's stateful encoding: `batches` run in order through one `StatefulBiLM`, each batch
    row starting from the state the previous batch left in that row. Returns every
    sentence's (L+1, n_tokens, 2 * projection_dim) layers, in input order."""
    runner = StatefulBiLM(bilm)
    ids = bilm.token_ids()
    out: List[Optional[np.ndarray]] = [None] * len(sentences)
    with torch.inference_mode():
        for batch in batches:
            layers = runner(ids.batch([sentences[i] for i in batch]).to(bilm.device)).layers
            layers = layers.float().cpu()
            for row, i in enumerate(batch):
                out[i] = layers[:, row, : len(sentences[i])].numpy()
    missing = [i for i, array in enumerate(out) if array is None]
    if missing:
        raise ElmoError(Errors.E043.format(missing=missing[:10]))
    return [array for array in out if array is not None]
