"""The files of `spacy-elmo embed`: its INPUT read line by line (a file, a pipe or standard
input), checked before any work, and its OUTPUT written as HDF5, atomically."""

from __future__ import annotations

import io
import json
import os
import stat
import sys
from pathlib import Path
from typing import Any, BinaryIO, Callable, Dict, Iterable, Iterator, Optional, Tuple

import h5py
import numpy as np

from ..errors import ElmoError, Errors
from ..files import PathLike
from ..files.atomic import atomic_write
from ..files.hdf5 import HDF5Writer

SENTENCE_INDEX = "sentence_to_index"

STDIN = "-"
BOM = "\ufeff"


def read_lines(path: PathLike) -> Iterator[str]:
    """The stripped lines of a UTF-8 file ("-": standard input), read lazily, once (a pipe
    works), a byte order mark at the start left out; split them for the tokens.

    The file is checked at once; a line that is not UTF-8 raises when it is reached."""
    if str(path) == STDIN:
        return _decoded_lines(sys.stdin.buffer, "<stdin>")
    path = Path(path)
    check_readable(path)
    return _decoded_lines(path.open("rb"), str(path))


def _decoded_lines(stream: BinaryIO, name: str) -> Iterator[str]:
    with stream:
        for number, raw in enumerate(stream, start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as err:
                raise ElmoError(Errors.E010.format(line=number, path=name, err=err)) from err
            if number == 1:  # a UTF-8 byte order mark is no part of the first token
                line = line.removeprefix(BOM)
            yield line.strip()


def count_lines(path: PathLike) -> Optional[int]:
    """Number of lines (a last line without a newline counts), reading in blocks; None
    for input that can be read only once (standard input, even redirected from a file, a
    pipe, a device)."""
    if str(path) == STDIN or not _is_regular_file(path):
        return None
    n, last = 0, b"\n"
    with Path(path).open("rb") as f:
        while block := f.read(1 << 20):
            n += block.count(b"\n")
            last = block[-1:]
    return n + (last != b"\n")


def _stat(path: PathLike) -> Optional[os.stat_result]:
    try:
        return os.fstat(sys.stdin.fileno()) if str(path) == STDIN else os.stat(path)
    except (OSError, ValueError, io.UnsupportedOperation):
        return None


def _is_regular_file(path: PathLike) -> bool:
    st = _stat(path)
    return st is not None and stat.S_ISREG(st.st_mode)


def check_readable(path: Path) -> None:
    """Raise a catalogue error unless `path` is a readable file."""
    if not path.exists():
        raise ElmoError(Errors.E001.format(path=path, cwd=Path.cwd()))
    if path.is_dir() or not os.access(path, os.R_OK):
        raise ElmoError(Errors.E022.format(path=path))


def write_embeddings(path: PathLike, items: Iterable[Tuple[str, np.ndarray]]) -> int:
    """Write one dataset per (sentence, array) item, named "0", "1", ..., and
    `sentence_to_index` (JSON: sentence text -> dataset name, the last one for repeats).

    Datasets are written as they come; the file is built under a temporary name and
    renamed at the end, so a failed run leaves no half-written OUTPUT. Returns the count.
    Memory does not grow with the vectors, only with the per-line bookkeeping: the index's
    text and HDF5's metadata, about 1.7 KB a line (measured: 310 MB RSS for 3,000 lines,
    356 MB for 30,000, tiny model).
    """
    return write_datasets(path, ((str(n), s, a) for n, (s, a) in enumerate(items)))


def write_datasets(path: PathLike, items: Iterable[Tuple[str, str, np.ndarray]],
                   attrs: Optional[Callable[[str], Dict[str, Any]]] = None) -> int:
    """`write_embeddings` with the dataset names given: (name, sentence, array) items; the
    file's attributes from `attrs(index)` (the `sentence_to_index` text), called once the
    items are exhausted."""
    path = Path(path)
    if path.is_dir():
        raise ElmoError(Errors.E009.format(path=path, err="it is a directory"))
    index: Dict[str, str] = {}
    n = 0
    try:
        with atomic_write(path, ".hdf5") as tmp, HDF5Writer(tmp) as out:
            for name, sentence, array in items:
                out.file.create_dataset(name, data=array)
                out.check()
                index[sentence] = name
                n += 1
            text = json.dumps(index)
            data = out.file.create_dataset(SENTENCE_INDEX, (1,), dtype=h5py.string_dtype())
            data[0] = text
            out.file.attrs.update(attrs(text) if attrs is not None else {})
    except OSError as err:
        raise ElmoError(Errors.E009.format(path=path, err=err)) from err
    return n
