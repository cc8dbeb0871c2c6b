"""A trained biLM language model as files: the published layout (options.json +
weights.hdf5) with the vocabulary and the softmax beside it; snapshots of a run; reading
that softmax back."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any, Dict, List, NamedTuple, Optional

import h5py
import numpy as np
import srsly

from ..bilm.lm import BiLanguageModel
from ..bilm.options import OPTIONS_NAME
from ..bilm.sources import WEIGHTS_NAME
from ..bilm.weights import save_bilm, write_hdf5
from ..errors import ElmoError, Errors, damaged
from ..files import PathLike
from .checkpoint import load_checkpoint, model_from_checkpoint
from .vocab import VOCAB_NAME, Vocab

SOFTMAX_NAME = "softmax.hdf5"
# the files of an export: one of them in a directory is a model there
EXPORT_FILES = (OPTIONS_NAME, WEIGHTS_NAME, VOCAB_NAME, SOFTMAX_NAME)
SNAPSHOT_DIR = "snapshots"
SNAPSHOT_INFO = "dev.json"


def export(checkpoint: PathLike, directory: PathLike) -> Dict[str, Path]:
    """options.json + weights.hdf5 (published layout), vocab.txt and softmax.hdf5."""
    data = load_checkpoint(checkpoint)
    return export_model(model_from_checkpoint(data), data["vocab"], directory)


def export_model(model: BiLanguageModel, vocab: List[str],
                 directory: PathLike) -> Dict[str, Path]:
    """Write a BiLanguageModel in the export layout (see `export`)."""
    directory = Path(directory)
    options_path, weights_path = save_bilm(model.bilm, directory)
    vocab_path = directory / VOCAB_NAME
    Vocab(vocab).to_file(vocab_path)
    softmax_path = directory / SOFTMAX_NAME
    write_hdf5(softmax_path, {
        "softmax/W": model.softmax.weight.detach().cpu().numpy(),
        "softmax/b": model.softmax.bias.detach().cpu().numpy(),
    })
    return {"options": options_path, "weights": weights_path, "vocab": vocab_path,
            "softmax": softmax_path}


class Softmax(NamedTuple):
    """The softmax and vocabulary an export carries beside its biLM."""

    vocab: Vocab
    weight: np.ndarray
    bias: np.ndarray


def read_softmax(weights: Path, dim: int) -> Optional[Softmax]:
    """The softmax.hdf5 and vocab.txt beside an export's weights (its directory or weights
    file), shapes checked against the biLM's projection_dim; None when it has neither (a
    published biLM). One without the other is an error."""
    directory = weights if weights.is_dir() else weights.parent
    missing = [n for n in (SOFTMAX_NAME, VOCAB_NAME) if not (directory / n).exists()]
    if len(missing) == 2:
        return None
    if missing:
        raise ElmoError(Errors.E115.format(path=directory, missing=missing[0]))
    vocab = Vocab.from_file(directory / VOCAB_NAME)
    try:
        with h5py.File(directory / SOFTMAX_NAME, "r") as f:
            weight, bias = f["softmax/W"][...], f["softmax/b"][...]
    except (OSError, KeyError, ValueError) as err:
        raise damaged(directory / SOFTMAX_NAME, "an export's softmax (softmax/W, softmax/b)",
                      err) from err
    if weight.shape != (len(vocab), dim) or bias.shape != (len(vocab),):
        raise ElmoError(Errors.E116.format(path=directory, found=weight.shape,
                                           n_vocab=len(vocab), dim=dim,
                                           expected=(len(vocab), dim)))
    return Softmax(vocab, weight, bias)


def write_snapshot(model: BiLanguageModel, vocab: List[str], run_dir: Path, step: int,
                   record: Dict[str, Any]) -> Path:
    """Export the model as `<run_dir>/snapshots/step_NNNNNNN/` with `dev.json` (`record`:
    step, tokens, dev perplexity) beside it; written to a temp directory first and renamed,
    so a snapshot directory is always complete."""
    final = run_dir / SNAPSHOT_DIR / f"step_{step:07d}"
    tmp = final.with_name(final.name + ".tmp")
    if tmp.exists():
        shutil.rmtree(tmp)
    export_model(model, vocab, tmp)
    srsly.write_json(tmp / SNAPSHOT_INFO, record)
    if final.exists():
        shutil.rmtree(final)
    os.replace(tmp, final)
    return final
