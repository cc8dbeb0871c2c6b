"""Read and write the published bilm-tf / AllenNLP weights layout (`weights.hdf5`), and
load a biLM from wherever `sources.locate` finds it."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Tuple, cast

import h5py
import numpy as np
import torch
from torch import nn

from ...errors import ElmoError, Errors, damaged
from ...files import PathLike
from ...files.atomic import atomic_write
from ...files.hdf5 import HDF5Writer
from ...files.names import OPTIONS_NAME, WEIGHTS_NAME
from ..lstm import ProjectedLSTMLayer
from ..model import BiLM
from ..options import BiLMOptions
from .efml import load_efml
from .finite import check_finite
from .sources import BiLMFiles, locate


def _hdf5_names(options: BiLMOptions) -> Iterator[Tuple[str, Tuple[int, ...]]]:
    """Every dataset of the layout with its expected shape."""
    o = options
    yield "char_embed", (261, o.char_embed_dim)
    for i, (width, n) in enumerate(o.filters):
        yield f"CNN/W_cnn_{i}", (1, width, o.char_embed_dim, n)
        yield f"CNN/b_cnn_{i}", (n,)
    F = o.n_filters
    for k in range(o.n_highway):
        for name in ("carry", "transform"):
            yield f"CNN_high_{k}/W_{name}", (F, F)
            yield f"CNN_high_{k}/b_{name}", (F,)
    yield "CNN_proj/W_proj", (F, o.projection_dim)
    yield "CNN_proj/b_proj", (o.projection_dim,)
    for d in range(2):
        for layer in range(o.n_layers):
            prefix = _cell_prefix(d, layer)
            yield f"{prefix}/W_0", (2 * o.projection_dim, 4 * o.lstm_dim)
            yield f"{prefix}/B", (4 * o.lstm_dim,)
            yield f"{prefix}/W_P_0", (o.lstm_dim, o.projection_dim)


def _highways(bilm: BiLM) -> List[nn.Linear]:
    return cast(List[nn.Linear], list(bilm.encoder.highways))


def _lstm_layers(bilm: BiLM) -> List[ProjectedLSTMLayer]:
    return cast(List[ProjectedLSTMLayer], list(bilm.lstm.layers))


def _cell_prefix(direction: int, layer: int) -> str:
    return f"RNN_{direction}/RNN/MultiRNNCell/Cell{layer}/LSTMCell"


def read_hdf5(path: PathLike, options: BiLMOptions) -> Dict[str, np.ndarray]:
    """All datasets of a weights file, checked against the options' shapes; layers the
    options leave out (highway, LSTM, convolution) are an error, not silently dropped."""
    path = Path(path)
    if not path.exists():
        raise ElmoError(Errors.E001.format(path=path, cwd=Path.cwd()))
    try:
        with h5py.File(path, "r") as f:
            arrays = {name: _read_dataset(f, path, name, shape)
                      for name, shape in _hdf5_names(options)}
            _check_unused(f, path, options)
    except ElmoError:
        raise
    except (OSError, KeyError, ValueError) as err:
        raise damaged(path, "an HDF5 weights file" + _sniff(path), err) from err
    check_finite(path, arrays)
    return arrays


def _read_dataset(f: h5py.File, path: Path, name: str, shape: Tuple[int, ...]) -> np.ndarray:
    """One dataset of the layout as float32, checked to be a dataset of `shape`."""
    data = f.get(name)
    if not isinstance(data, h5py.Dataset):
        if data is not None:
            hint = f"'{name}' is an HDF5 group there, not a dataset."
        elif "char_embed" in f:
            hint = "The options may describe a different model (layers, highway)."
        else:
            hint = ("It may be another model's HDF5 file; ELMo weights files come as "
                    "`*_weights.hdf5` from AllenNLP/bilm-tf, or from `spacy-elmo "
                    "export` for models pretrained here.")
        raise ElmoError(Errors.E003.format(path=path, name=name, hint=hint))
    if tuple(data.shape) != shape:
        raise ElmoError(Errors.E004.format(name=name, path=path, found=tuple(data.shape),
                                           expected=shape))
    return np.asarray(data[...], dtype=np.float32)


# Datasets of layers that the options can leave out, by the kind of layer (E011): the index
# of the layer is the first group. Other datasets a file may hold are not read, nor refused.
_NUMBERED = (
    ("highway layers", re.compile(r"CNN_high_(\d+)/")),
    ("LSTM layers", re.compile(r"RNN_[01]/RNN/MultiRNNCell/Cell(\d+)/")),
    ("convolution filters", re.compile(r"CNN/[Wb]_cnn_(\d+)$")),
)


def _check_unused(f: h5py.File, path: Path, options: BiLMOptions) -> None:
    """Raise E011 when the file holds layers beyond those the options describe."""
    used = {"highway layers": options.n_highway, "LSTM layers": options.n_layers,
            "convolution filters": len(options.filters)}
    unused: Dict[str, List[str]] = {}
    for name in _dataset_names(f):
        for what, pattern in _NUMBERED:
            match = pattern.match(name)
            if match and int(match.group(1)) >= used[what]:
                unused.setdefault(what, []).append(name)
    if unused:
        names = [n for found in unused.values() for n in found]
        shown = ", ".join(names[:4]) + (f", ... ({len(names)} datasets)" if len(names) > 4
                                        else "")
        raise ElmoError(Errors.E011.format(path=path, what=" and ".join(unused), names=shown))


def _dataset_names(f: h5py.File) -> List[str]:
    """The names of all datasets in a file, sorted."""
    names: List[str] = []
    f.visititems(lambda name, obj: names.append(name) if isinstance(obj, h5py.Dataset)
                 else None)
    return sorted(names)


def is_hdf5(path: Path) -> bool:
    """Whether a file is HDF5 (weights, a softmax, vectors...), whatever it holds."""
    try:
        return bool(h5py.is_hdf5(os.fspath(path)))
    except (OSError, ValueError):
        return False


def _sniff(path: Path) -> str:
    """A hint at what a file that is not HDF5 really is."""
    try:
        with open(path, "rb") as f:
            head = f.read(8)
    except OSError:
        return ""
    if head.startswith(b"PK"):
        return (" (it is a zip archive, e.g. a PyTorch checkpoint; a checkpoint of "
                "`spacy-elmo pretrain` becomes a weights file with `spacy-elmo export`)")
    if head[:1] == b"\x80":
        return " (it is a Python pickle, e.g. a PyTorch checkpoint)"
    if head.lstrip()[:1] in (b"{", b"["):
        return " (it is JSON: options.json? pass it as the options)"
    if head.startswith(b"\x89HDF"):
        return " (it is HDF5, but could not be read)"
    return ""


def load_into(bilm: BiLM, arrays: Dict[str, np.ndarray]) -> None:
    """Copy bilm-tf arrays into a BiLM's parameters (in place)."""
    o = bilm.options
    enc = bilm.encoder

    def t(a: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(np.ascontiguousarray(a))

    with torch.no_grad():
        enc.char_embedding.weight.zero_()
        enc.char_embedding.weight[1:].copy_(t(arrays["char_embed"]))
        for i, (weight, bias) in enumerate(zip(enc.conv_weights, enc.conv_biases, strict=True)):
            weight.copy_(t(arrays[f"CNN/W_cnn_{i}"][0].transpose(2, 1, 0)))  # (n, dim, width)
            bias.copy_(t(arrays[f"CNN/b_cnn_{i}"]))
        F = o.n_filters
        for k, hw in enumerate(_highways(bilm)):
            hw.weight[:F].copy_(t(arrays[f"CNN_high_{k}/W_transform"].T))
            hw.weight[F:].copy_(t(arrays[f"CNN_high_{k}/W_carry"].T))
            hw.bias[:F].copy_(t(arrays[f"CNN_high_{k}/b_transform"]))
            hw.bias[F:].copy_(t(arrays[f"CNN_high_{k}/b_carry"]))
        enc.projection.weight.copy_(t(arrays["CNN_proj/W_proj"].T))
        enc.projection.bias.copy_(t(arrays["CNN_proj/b_proj"]))
        P = o.projection_dim
        for layer_idx, layer in enumerate(_lstm_layers(bilm)):
            for d in range(2):
                prefix = _cell_prefix(d, layer_idx)
                w0 = arrays[f"{prefix}/W_0"]
                layer.w_input[d].copy_(t(w0[:P]))
                layer.w_hidden[d].copy_(t(w0[P:]))
                layer.bias[d].copy_(t(arrays[f"{prefix}/B"]))
                layer.w_proj[d].copy_(t(arrays[f"{prefix}/W_P_0"]))


def to_arrays(bilm: BiLM) -> Dict[str, np.ndarray]:
    """A BiLM's parameters in the bilm-tf layout (the inverse of `load_into`)."""
    o = bilm.options
    enc = bilm.encoder

    def a(x: torch.Tensor) -> np.ndarray:
        return np.ascontiguousarray(x.detach().float().cpu().numpy())

    if bilm.dictionary is not None:
        raise ElmoError(Errors.E041)
    arrays: Dict[str, np.ndarray] = {"char_embed": a(enc.char_embedding.weight[1:])}
    for i, (weight, bias) in enumerate(zip(enc.conv_weights, enc.conv_biases, strict=True)):
        arrays[f"CNN/W_cnn_{i}"] = np.ascontiguousarray(a(weight).transpose(2, 1, 0)[None])
        arrays[f"CNN/b_cnn_{i}"] = a(bias)
    F = o.n_filters
    for k, hw in enumerate(_highways(bilm)):
        arrays[f"CNN_high_{k}/W_transform"] = a(hw.weight[:F].T)
        arrays[f"CNN_high_{k}/W_carry"] = a(hw.weight[F:].T)
        arrays[f"CNN_high_{k}/b_transform"] = a(hw.bias[:F])
        arrays[f"CNN_high_{k}/b_carry"] = a(hw.bias[F:])
    arrays["CNN_proj/W_proj"] = a(enc.projection.weight.T)
    arrays["CNN_proj/b_proj"] = a(enc.projection.bias)
    for layer_idx, layer in enumerate(_lstm_layers(bilm)):
        for d in range(2):
            prefix = _cell_prefix(d, layer_idx)
            arrays[f"{prefix}/W_0"] = np.concatenate([a(layer.w_input[d]),
                                                      a(layer.w_hidden[d])])
            arrays[f"{prefix}/B"] = a(layer.bias[d])
            arrays[f"{prefix}/W_P_0"] = a(layer.w_proj[d])
    return arrays


def write_hdf5(path: PathLike, arrays: Dict[str, np.ndarray]) -> None:
    """Write datasets atomically (temp file in the same directory, then rename)."""
    path = Path(path)
    try:
        with atomic_write(path, ".hdf5") as tmp, HDF5Writer(tmp) as out:
            for name, value in arrays.items():
                out.file.create_dataset(name, data=value)
    except OSError as err:
        raise ElmoError(Errors.E009.format(path=path, err=err)) from err


def load_bilm(weights: Optional[PathLike], options: Optional[PathLike] = None,
              word_cache_size: int = 0, *, format: str = "auto", lang: str = "en") -> BiLM:
    """A BiLM in eval mode, from whatever `locate` accepts: a weights file (+ options), a
    directory, a published name, a URL, or None (the biLM bundled for `lang`).

    format: "allennlp" (bilm-tf/AllenNLP: weights.hdf5 + options.json), "efml" (an
    ELMoForManyLangs model directory; `options` is then its network config, needed only when
    neither the directory nor the built-in released config has it), or "auto" (detected).
    """
    return load_files(locate(weights, options, format=format, lang=lang), word_cache_size)


def load_files(files: BiLMFiles, word_cache_size: int = 0) -> BiLM:
    """A BiLM in eval mode from the files `locate` found."""
    if files.format == "efml":
        return load_efml(files.weights, files.options, word_cache_size=word_cache_size)
    assert files.options is not None  # `locate` finds the options of this format
    opts = BiLMOptions.from_file(files.options)
    arrays = read_hdf5(files.weights, opts)  # shapes checked before the model is allocated
    bilm = BiLM(opts, word_cache_size=word_cache_size)
    load_into(bilm, arrays)
    return bilm.eval()


def save_bilm(bilm: BiLM, directory: PathLike) -> Tuple[Path, Path]:
    """Write `options.json` + `weights.hdf5` into a directory; returns their paths."""
    directory = Path(directory)
    if directory.exists() and not directory.is_dir():
        raise ElmoError(Errors.E028.format(path=directory, what="the export's files go in it"))
    weights_path = directory / WEIGHTS_NAME
    options_path = directory / OPTIONS_NAME
    write_hdf5(weights_path, to_arrays(bilm))
    bilm.options.to_file(options_path)
    return options_path, weights_path
