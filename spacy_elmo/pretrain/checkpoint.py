"""Training checkpoints: written atomically and complete, checksummed, and read back in
today's layout whichever version wrote them."""

from __future__ import annotations

import pickle
import zipfile
import zlib
from pathlib import Path
from typing import Any, Dict, Optional

import torch

from ..bilm.lm import BiLanguageModel
from ..bilm.model import BiLM
from ..bilm.options import BiLMOptions
from ..bilm.weights import is_hdf5
from ..checksums import content_sha256 as content_checksum
from ..checksums import tensors_sha256 as tensors_checksum
from ..errors import ElmoError, Errors, first_line
from ..files import RUN_CHECKPOINT, PathLike, atomic_write

CHECKPOINT_NAME = RUN_CHECKPOINT
FORMAT = "spacy-elmo-pretrain/1"
# The checksum over the whole content (tensors and everything else) that checkpoints carry;
# those of earlier versions carry one over their tensors only, which is checked instead
# (both computed by spacy_elmo.checksums).
CHECKSUM = "content_sha256"
TENSORS_CHECKSUM = "tensors_sha256"
# Settings that checkpoints recorded only from a later version on, with the value an earlier
# run had: before the shuffle buffer existed, runs read their files in order.
IMPLIED_SETTINGS = {"shuffle_buffer": 0}


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
    checked against its checksum: over the whole content, or over the tensors for
    checkpoints of earlier versions (those written before checksums load unchecked)."""
    path = checkpoint_path(path)
    if not path.exists():
        raise ElmoError(Errors.E001.format(path=path, cwd=Path.cwd()))
    try:
        data = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # torch raises many kinds for a corrupt or foreign file
        raise _unreadable(path, err) from None
    if not isinstance(data, dict):
        raise ElmoError(Errors.E108.format(path=path, err="no spacy-elmo pretraining format"))
    if not _checksum_matches(data):  # before the format, which damage can change too
        raise ElmoError(Errors.E119.format(path=path))
    if data.get("format") != FORMAT:
        raise ElmoError(Errors.E108.format(path=path, err="no spacy-elmo pretraining format"))
    return upgrade(data)


def _checksum_matches(data: Dict[str, Any]) -> bool:
    """Whether a loaded checkpoint matches the checksum it carries (True without one)."""
    if CHECKSUM in data:
        return bool(data[CHECKSUM] == content_checksum(data))
    if TENSORS_CHECKSUM in data:
        return bool(data[TENSORS_CHECKSUM] == tensors_checksum(data))
    return True


def upgrade(data: Dict[str, Any]) -> Dict[str, Any]:
    """A checkpoint in today's layout, whichever version wrote it (in place). `implied`:
    the settings the run had without recording them, which a resumed run takes over."""
    implied = {k: v for k, v in IMPLIED_SETTINGS.items() if k not in data["frozen"]}
    data["frozen"].update(implied)
    data["implied"] = implied
    data.setdefault("cpu_elapsed", 0.0)  # CPU time was counted from a later version on
    for rank in data["ranks"]:
        rank.setdefault("cuda_rng", None)
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


def _damage(path: Path, err: Exception) -> Optional[str]:
    """What is wrong with an archive that torch.save wrote (it holds a `data.pkl`) but torch
    cannot load: unreadable, bytes that do not match their CRC-32, or a structure torch
    refuses. None for other files, and for an intact archive whose pickle torch rejected:
    that pickle is as written, and really holds foreign objects."""
    try:
        with zipfile.ZipFile(path) as archive:
            if not any(n.split("/")[-1] == "data.pkl" for n in archive.namelist()):
                return None
            bad = archive.testzip()
    except (OSError, EOFError, ValueError, zipfile.BadZipFile, zlib.error) as zip_err:
        if not _torch_archive_head(path):
            return None
        return f"its archive cannot be read, e.g. the file was cut short: {zip_err}"
    if bad is not None:
        return f"the bytes of '{bad}' in it do not match the CRC-32 written with them"
    if _foreign_pickle(err):
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


def model_from_checkpoint(data: Dict[str, Any]) -> BiLanguageModel:
    """The BiLanguageModel stored in a loaded checkpoint."""
    options = BiLMOptions.from_json_dict(data["options"])
    model = BiLanguageModel(BiLM(options), len(data["vocab"]))
    model.load_state_dict(data["model"])
    return model
