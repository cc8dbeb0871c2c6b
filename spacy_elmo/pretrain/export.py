"""A trained biLM language model as files: the published layout (options.json +
weights.hdf5) with the vocabulary and the softmax beside it; snapshots of a run; reading
that softmax back. An export directory is written whole (`files.atomic.atomic_directory`): a
failure leaves the previous one as it was, and weights that are not finite are never
written."""

from __future__ import annotations

import math
from contextlib import nullcontext
from pathlib import Path
from typing import Any, Dict, List, NamedTuple, Optional

import h5py
import numpy as np
import torch

from ..bilm.io import finite
from ..bilm.io.weights import save_bilm, write_hdf5
from ..bilm.lm import BiLanguageModel
from ..bilm.model import BiLM
from ..errors import ElmoError, Errors, damaged
from ..files import PathLike, names
from ..files.atomic import atomic_directory, is_temporary
from ..files.json_io import write_json
from ..files.lock import DirectoryLock
from .checkpoint import checkpoint_path, load_checkpoint, model_from_checkpoint
from .vocab import Vocab


def export(checkpoint: PathLike, directory: PathLike, *, overwrite: bool = False
           ) -> Dict[str, Path]:
    """options.json + weights.hdf5 (published layout), vocab.txt and softmax.hdf5 of a
    run's checkpoint, in `directory` (see `check_export_target`). When the directory lies
    in a pretraining run (e.g. RUN/model), the run's lock is held while writing, so that
    a running `pretrain` there refuses it (E071)."""
    source = checkpoint_path(checkpoint)
    directory = Path(directory)
    check_export_target(directory, source, overwrite=overwrite)
    run = owning_run(directory)
    with DirectoryLock(run) if run is not None else nullcontext():
        data = load_checkpoint(source)
        return export_model(model_from_checkpoint(data), data["vocab"], directory)


def check_export_target(directory: Path, checkpoint: Path, *, overwrite: bool) -> None:
    """Refuse, before any work, an export directory that is (or holds) the checkpoint
    (E025), is a file (E028), holds an export without `overwrite` (E026), or holds other
    files, which replacing the directory would delete (E072)."""
    if directory.exists() and not directory.is_dir():
        raise ElmoError(Errors.E028.format(path=directory, what="the export's files go in it"))
    if checkpoint.exists() and checkpoint.resolve().is_relative_to(directory.resolve()):
        raise ElmoError(Errors.E025.format(output=directory, input=checkpoint))
    if not directory.is_dir():
        return
    entries = sorted(entry.name for entry in directory.iterdir())
    if not overwrite and any(name in names.EXPORT_FILES for name in entries):
        raise ElmoError(Errors.E026.format(output=directory))
    foreign = [name for name in entries if name not in (*names.EXPORT_FILES, names.SNAPSHOT_INFO)
               and not is_temporary(name)]
    if foreign:
        raise ElmoError(Errors.E072.format(path=directory, names=", ".join(foreign[:5])))


def owning_run(path: Path) -> Optional[Path]:
    """The pretraining run directory that `path` lies in (one holding a checkpoint or a
    run's lock file), or None."""
    for parent in Path(path).resolve().parents:
        if (parent / names.CHECKPOINT_NAME).is_file() or (parent / names.LOCK_NAME).is_file():
            return parent
    return None


def export_model(model: BiLanguageModel, vocab: List[str], directory: PathLike, *,
                 info: Optional[Dict[str, Any]] = None) -> Dict[str, Path]:
    """Write a BiLanguageModel in the export layout (see `export`), with `info` as
    dev.json when given; the directory is replaced whole, once every file is written.
    Refuses weights that are not all finite (E141)."""
    directory = Path(directory)
    if directory.exists() and not directory.is_dir():
        raise ElmoError(Errors.E028.format(path=directory, what="the export's files go in it"))
    check_finite(model, f"an export to '{directory}'")
    softmax = Softmax(Vocab(vocab), model.softmax.weight.detach().cpu().numpy(),
                      model.softmax.bias.detach().cpu().numpy())
    with atomic_directory(directory) as tmp:
        write_export(tmp, model.bilm, softmax)
        if info is not None:
            write_json(tmp / names.SNAPSHOT_INFO, info)
    return {"options": directory / names.OPTIONS_NAME, "weights": directory / names.WEIGHTS_NAME,
            "vocab": directory / names.VOCAB_NAME, "softmax": directory / names.SOFTMAX_NAME}


def write_export(directory: Path, bilm: BiLM, softmax: Optional[Softmax]) -> None:
    """The export's files in `directory` (the biLM's options and weights, and the softmax
    and vocabulary when given); callers write into an `atomic_directory`."""
    save_bilm(bilm, directory)
    if softmax is not None:
        softmax.vocab.to_file(directory / names.VOCAB_NAME)
        write_hdf5(directory / names.SOFTMAX_NAME, {"softmax/W": softmax.weight,
                                                    "softmax/b": softmax.bias})


def check_finite(model: torch.nn.Module, what: str) -> None:
    """Raise E141 when a parameter of `model` holds NaN or inf (`what`: what would have
    been written)."""
    with torch.no_grad():
        for name, param in model.named_parameters():
            # NaN and inf carry into a sum, and float32 values cannot overflow a float64
            # one: exact, and much faster than an element-wise test on large models
            if not math.isfinite(float(param.sum(dtype=torch.float64))):
                total = sum(int((~torch.isfinite(p)).sum()) for p in model.parameters())
                raise ElmoError(Errors.E141.format(what=what, n=total, name=name))


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
    missing = [n for n in (names.SOFTMAX_NAME, names.VOCAB_NAME) if not (directory / n).exists()]
    if len(missing) == 2:
        return None
    if missing:
        raise ElmoError(Errors.E115.format(path=directory, missing=missing[0]))
    vocab = Vocab.from_file(directory / names.VOCAB_NAME)
    try:
        with h5py.File(directory / names.SOFTMAX_NAME, "r") as f:
            weight, bias = f["softmax/W"][...], f["softmax/b"][...]
    except (OSError, KeyError, ValueError) as err:
        raise damaged(directory / names.SOFTMAX_NAME, "an export's softmax (softmax/W, softmax/b)",
                      err) from err
    finite.check_finite(directory / names.SOFTMAX_NAME, {"softmax/W": weight, "softmax/b": bias})
    if weight.shape != (len(vocab), dim) or bias.shape != (len(vocab),):
        raise ElmoError(Errors.E116.format(path=directory, found=weight.shape,
                                           n_vocab=len(vocab), dim=dim,
                                           expected=(len(vocab), dim)))
    return Softmax(vocab, weight, bias)


def write_snapshot(model: BiLanguageModel, vocab: List[str], run_dir: Path, step: int,
                   record: Dict[str, Any]) -> Path:
    """Export the model as `<run_dir>/snapshots/step_NNNNNNN/` with `dev.json` (`record`:
    step, tokens, dev perplexity) beside it, written whole as every export is."""
    final = run_dir / names.SNAPSHOT_DIR / f"{names.SNAPSHOT_PREFIX}{step:07d}"
    export_model(model, vocab, final, info=record)
    return final
