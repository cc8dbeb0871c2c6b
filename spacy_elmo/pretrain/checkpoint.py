"""Training checkpoints (atomic, complete) and their export to the published layout."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any, Dict, List, Union

import srsly
import torch

from ..bilm.files import atomic_write
from ..bilm.lm import BiLanguageModel
from ..bilm.model import BiLM
from ..bilm.options import BiLMOptions
from ..bilm.weights import save_bilm, write_hdf5
from ..errors import ElmoError, Errors
from .vocab import VOCAB_NAME, Vocab

CHECKPOINT_NAME = "checkpoint.pt"
SOFTMAX_NAME = "softmax.hdf5"
SNAPSHOT_DIR = "snapshots"
SNAPSHOT_INFO = "dev.json"
FORMAT = "spacy-elmo-pretrain/1"
PathLike = Union[str, "os.PathLike[str]"]


def save_checkpoint(path: Path, payload: Dict[str, Any]) -> None:
    """Write with torch.save to a temp file beside `path`, then rename over it: a failed
    write leaves the previous checkpoint as it was."""
    try:
        # through a Python file: a failed write then says why (e.g. a full disk)
        with atomic_write(path, ".pt") as tmp, open(tmp, "wb") as f:
            torch.save({"format": FORMAT, **payload}, f)
    except (OSError, RuntimeError) as err:
        raise ElmoError(Errors.E109.format(path=path, err=err)) from err


def checkpoint_path(path: PathLike) -> Path:
    """The checkpoint file of a run directory, or the file itself."""
    path = Path(path)
    return path / CHECKPOINT_NAME if path.is_dir() else path


def load_checkpoint(path: PathLike) -> Dict[str, Any]:
    path = checkpoint_path(path)
    if not path.exists():
        raise ElmoError(Errors.E001.format(path=path, cwd=Path.cwd()))
    try:
        data = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # torch raises many kinds for a corrupt or foreign file
        raise ElmoError(Errors.E108.format(path=path, err=err)) from err
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ElmoError(Errors.E108.format(path=path, err="no spacy-elmo pretraining format"))
    return data


def model_from_checkpoint(data: Dict[str, Any]) -> BiLanguageModel:
    """The BiLanguageModel stored in a loaded checkpoint."""
    options = BiLMOptions.from_json_dict(data["options"])
    model = BiLanguageModel(BiLM(options), len(data["vocab"]))
    model.load_state_dict(data["model"])
    return model


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
