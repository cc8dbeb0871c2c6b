"""Training checkpoints: written atomically and complete, with a checksum over their whole
content that loading checks. Checkpoints of spacy-elmo 0.1 that lack it are refused (E251)."""

from __future__ import annotations

import pickle
import zipfile
import zlib
from pathlib import Path
from typing import Any, Dict, Optional

import torch

from ..bilm.io.weights import is_hdf5
from ..bilm.lm import BiLanguageModel
from ..bilm.model import BiLM
from ..bilm.options import BiLMOptions
from ..checksums import content_sha256 as content_checksum
from ..errors import ElmoError, Errors, first_line
from ..files import PathLike
from ..files.atomic import atomic_write
from ..files.names import CHECKPOINT_NAME, WEIGHTS_NAME
from .config import PretrainConfig

FORMAT = "spacy-elmo-pretrain/1"
# The checksum over the whole content (tensors and everything else) that checkpoints carry
# (computed by spacy_elmo.checksums); some of spacy-elmo 0.1 carried one over their tensors
# only (under this key), the first ones none.
CHECKSUM = "content_sha256"
OLD_CHECKSUM = "tensors_sha256"


def save_checkpoint(path: Path, payload: Dict[str, Any]) -> None:
    """Write with torch.save to a temp file beside `path`, then rename over it: a failed
    write leaves the previous checkpoint as it was. A checksum of the whole content goes
    with it, so that damage to the file later is found on loading."""
    data = {"format": FORMAT, **payload}
    data[CHECKSUM] = content_checksum(data)
    try:
        # through a Python file: a failed write then says why (e.g. a full disk)
        with atomic_write(path, ".pt") as tmp, open(tmp, "wb") as f:
            torch.save(data, f)
    except (OSError, RuntimeError) as err:
        raise ElmoError(Errors.E109.format(path=path, err=err)) from err


def checkpoint_path(path: PathLike) -> Path:
    """The checkpoint file of a run directory, or the file itself."""
    path = Path(path)
    return path / CHECKPOINT_NAME if path.is_dir() else path


def load_checkpoint(path: PathLike) -> Dict[str, Any]:
    """A checkpoint's contents (tensors only, no code: torch's weights_only loading),
    checked against its checksum (E119); one of spacy-elmo 0.1 without it is E251."""
    path = checkpoint_path(path)
    if not path.exists():
        if path.name == CHECKPOINT_NAME and (path.parent / WEIGHTS_NAME).is_file():
            raise ElmoError(Errors.E108.format(
                path=path.parent, err="it is an export already (weights.hdf5), which every command "
                "that takes a biLM reads as it is; copy the directory to have another"))
        raise ElmoError(Errors.E001.format(path=path, cwd=Path.cwd()))
    try:
        data = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # torch raises many kinds for a corrupt or foreign file
        raise _unreadable(path, err) from None
    foreign = ElmoError(Errors.E108.format(path=path, err="no spacy-elmo pretraining format"))
    if not isinstance(data, dict):
        raise foreign
    if CHECKSUM not in data:
        if data.get("format") != FORMAT:
            raise foreign
        damage = _damage(path, None)  # a flipped bit in the checksum's own name, not 0.1
        if damage is not None:
            raise ElmoError(Errors.E125.format(path=path, err=damage))
        found = "a checksum over its tensors only" if OLD_CHECKSUM in data else "no checksum"
        raise ElmoError(Errors.E251.format(path=path, found=found, run=path.parent))
    if data[CHECKSUM] != content_checksum(data):  # before the format, which damage can change
        raise ElmoError(Errors.E119.format(path=path))
    if data.get("format") != FORMAT:
        raise foreign
    return data


def _unreadable(path: Path, err: Exception) -> ElmoError:
    """The error for a file torch could not load: E125 for a damaged checkpoint, else E108
    (not a checkpoint at all)."""
    if is_hdf5(path):
        return ElmoError(Errors.E108.format(path=path, err=(
            "it is an HDF5 file, e.g. a biLM's weights.hdf5: a weights file is already an "
            "export, usable as it is; `spacy-elmo export` and `perplexity` take a pretraining "
            "run directory or its checkpoint.pt")))
    damage = _damage(path, err)
    if damage is not None:
        return ElmoError(Errors.E125.format(path=path, err=damage))
    if _foreign_pickle(err):
        return ElmoError(Errors.E108.format(path=path, err=(
            "it holds Python objects other than tensors and plain data, which a "
            "spacy-elmo checkpoint never does; it was not loaded, since loading such a "
            "file can run code")))
    return ElmoError(Errors.E108.format(path=path, err=first_line(err)[:300]))


def _damage(path: Path, err: Optional[Exception]) -> Optional[str]:
    """What is wrong with an archive that torch.save wrote (it holds a `data.pkl`) but torch
    cannot load (`err`; None: that torch loaded): unreadable, bytes that do not match their
    CRC-32, or a structure torch refuses. None for other files, and for an intact archive
    whose pickle torch rejected: that pickle is as written, and really holds foreign
    objects."""
    try:
        with zipfile.ZipFile(path) as archive:
            if not any(n.split("/")[-1] == "data.pkl" for n in archive.namelist()):
                return None
            bad = archive.testzip()
    except (OSError, EOFError, ValueError, NotImplementedError, zipfile.BadZipFile,
            zlib.error) as zip_err:  # NotImplementedError: a compression method changed
        if not _torch_archive_head(path):
            return None
        return f"its archive cannot be read, e.g. the file was cut short: {zip_err}"
    if bad is not None:
        return f"the bytes of '{bad}' in it do not match the CRC-32 written with them"
    if err is None or _foreign_pickle(err):
        return None
    return "torch cannot read its archive: " + first_line(err).split(". ")[0][:200]


def _torch_archive_head(path: Path) -> bool:
    """Whether a file begins as torch.save's archives do: a zip entry `.../data.pkl`."""
    try:
        with open(path, "rb") as f:
            head = f.read(256)
    except OSError:
        return False
    return head.startswith(b"PK\x03\x04") and b"data.pkl" in head


def _foreign_pickle(err: Exception) -> bool:
    """Whether torch's weights_only loading refused what a pickle holds."""
    return isinstance(err, pickle.UnpicklingError) or "weights_only" in str(err)


def model_from_checkpoint(data: Dict[str, Any], config: Optional[PretrainConfig] = None
                          ) -> BiLanguageModel:
    """The BiLanguageModel stored in a loaded checkpoint: as `config` trains it, or, without
    one, to evaluate or export."""
    bilm, n_vocab = BiLM(BiLMOptions.from_json_dict(data["options"])), len(data["vocab"])
    model = (BiLanguageModel.for_evaluation(bilm, n_vocab) if config is None
             else config.language_model(bilm, n_vocab))
    model.load_state_dict(data["model"])
    return model
