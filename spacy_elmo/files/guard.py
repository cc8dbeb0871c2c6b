"""The one check before a command writes a file (`guard_output`), and what it knows of the
layouts it protects: a pretraining run, an exported or published biLM."""

from __future__ import annotations

import io
import os
import sys
from pathlib import Path
from typing import Iterable, Optional

from ..errors import ElmoError, Errors
from . import PathLike, names

STDOUT = "-"
# the files of a biLM in the published layout: a directory holding both is a model
MODEL_FILES = (names.WEIGHTS_NAME, names.OPTIONS_NAME)


def check_writable_path(path: Path, what: str) -> None:
    """Raise E009 before any work when `path` can never be written: it is a directory, or
    a file stands where one of its parent directories would be."""
    if path.is_dir():
        raise ElmoError(Errors.E009.format(path=path, err=f"it is a directory; give {what}"))
    for parent in path.parents:
        if parent.exists():
            if not parent.is_dir():
                raise ElmoError(Errors.E009.format(path=path,
                                                   err=f"'{parent}' is a file, not a directory"))
            return



def guard_output(output: PathLike, *, inputs: Iterable[PathLike] = (), overwrite: bool = False,
                 what: str = "OUTPUT", stdout_ok: bool = False) -> Optional[Path]:
    """The one check before a command writes a file. Returns the path to write, or None for
    standard output ('-', where `stdout_ok`; else E070). Refuses, before any work: an output
    that is one of `inputs` by any name (same device and inode: hard and symbolic links) or
    lies inside an input directory (a model), or inside the pretraining run an input lies in
    (RUN/model, a snapshot, RUN/checkpoint.pt: the whole run), even with `overwrite` (E025);
    an output inside any run or export, or over a biLM's weights or options (E073, E167);
    a directory, or a path whose parent is a file (E009); an existing file, or a link to
    none, unless `overwrite` (E026)."""
    if str(output) == STDOUT:
        if stdout_ok:
            return None
        raise ElmoError(Errors.E070.format(what=what))
    path = Path(output)
    target = _stat_or_none(path)
    resolved = path.resolve()
    inputs = list(inputs)
    inputs += [run for source in inputs if (run := enclosing_run(Path(source))) is not None]
    _refuse_model_or_run(path)
    for source in inputs:
        source_path = Path(source)
        source_stat = _stat_or_none(source_path)
        if source_stat is None:
            continue
        if target is not None and (target.st_dev, target.st_ino) == (source_stat.st_dev,
                                                                     source_stat.st_ino):
            raise ElmoError(Errors.E025.format(output=output, input=source))
        inside = source_path.is_dir() and resolved.is_relative_to(source_path.resolve())
        if str(source) != STDOUT and inside:
            raise ElmoError(Errors.E025.format(output=output, input=source))
    check_writable_path(path, f"a file name for {what}")
    if (target is not None or path.is_symlink()) and not overwrite:
        raise ElmoError(Errors.E026.format(output=output))
    return path


def _refuse_model_or_run(path: Path) -> None:
    """E073 for an output inside a pretraining run (only `pretrain` and `export` write
    there, under the run's lock) or inside an exported biLM (weights.hdf5, options.json and
    softmax.hdf5: an export is replaced whole); E167 for one that would replace the
    weights.hdf5 or options.json of a biLM. Other files beside a biLM's two (the folder
    a downloaded biLM is kept in) may be written."""
    run = enclosing_run(path)
    if run is not None:
        raise ElmoError(Errors.E073.format(output=path, what="the pretraining run", where=run))
    parent = path.resolve().parent
    if all((parent / name).is_file() for name in MODEL_FILES):
        if (parent / names.SOFTMAX_NAME).is_file():
            raise ElmoError(Errors.E073.format(output=path, what="the exported biLM",
                                               where=parent))
        if path.name in MODEL_FILES:
            raise ElmoError(Errors.E167.format(output=path, name=path.name, where=parent))


def model_or_run(directory: Path) -> Optional[str]:
    """What `directory` is when its files are a model's or a run's, never text to read: "a
    pretraining run" (its checkpoint; from its start, its lock beside its config.json or
    vocab.txt) or "a biLM directory" (weights.hdf5: an export, a snapshot, a published
    biLM); None for any other directory."""
    started = (directory / names.LOCK_NAME).is_file() and any(
        (directory / name).is_file() for name in (names.CONFIG_NAME, names.VOCAB_NAME))
    if started or (directory / names.CHECKPOINT_NAME).is_file():
        return "a pretraining run"
    if (directory / names.WEIGHTS_NAME).is_file():
        return "a biLM directory"
    return None


def enclosing_run(path: Path) -> Optional[Path]:
    """The pretraining run directory `path` is, or lies in (up to 3 levels: RUN/model,
    RUN/snapshots/step_N/weights.hdf5), if any."""
    if str(path) == STDOUT:
        return None
    candidates = [path.resolve(), *list(path.resolve().parents)[:3]]
    return next((d for d in candidates if (d / names.CHECKPOINT_NAME).is_file()), None)


def _stat_or_none(path: Path) -> Optional[os.stat_result]:
    """The file's status ('-' is standard input), or None where there is none."""
    try:
        return os.fstat(sys.stdin.fileno()) if str(path) == STDOUT else path.stat()
    except (OSError, ValueError, io.UnsupportedOperation):
        return None
