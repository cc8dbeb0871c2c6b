"""Training checkpoints (atomic, complete) and their export to the published layout."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Dict, Union

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
FORMAT = "spacy-elmo-pretrain/1"
PathLike = Union[str, "os.PathLike[str]"]


def save_checkpoint(path: Path, payload: Dict[str, Any]) -> None:
    """Write with torch.save to a temp file beside `path`, then rename over it: a failed
    write leaves the previous checkpoint as it was."""
    try:
        with atomic_write(path, ".pt") as tmp:
            torch.save({"format": FORMAT, **payload}, tmp)
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
    model = model_from_checkpoint(data).eval()
    directory = Path(directory)
    options_path, weights_path = save_bilm(model.bilm, directory)
    vocab_path = directory / VOCAB_NAME
    Vocab(data["vocab"]).to_file(vocab_path)
    softmax_path = directory / SOFTMAX_NAME
    write_hdf5(softmax_path, {
        "softmax/W": model.softmax.weight.detach().cpu().numpy(),
        "softmax/b": model.softmax.bias.detach().cpu().numpy(),
    })
    return {"options": options_path, "weights": weights_path, "vocab": vocab_path,
            "softmax": softmax_path}
