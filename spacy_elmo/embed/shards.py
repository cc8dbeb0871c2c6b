"""Sharded `embed`: the lines of INPUT split over processes, machines or GPUs.

Shard i of N takes the lines whose 0-based number is i modulo N and writes them, under their
line numbers, to `OUTPUT.shard-<i>-of-<N>.hdf5`, i and N in five digits (written whole or not
at all). The process
that finishes the last shard writes OUTPUT: an index whose datasets are h5py virtual
datasets into the shard files (same names and `sentence_to_index` as a single-process run),
so it opens as one file while the shards lie beside it; a shard file gone later reads as
NaN, never as zeros. Each shard file records its signature (the input file, the settings
that change the vectors, and the digest of the biLM weights' content) and a SHA-256 of its
data. One of the same signature whose data verify is kept, so after a failure the same
command reruns only the shards that are missing; a damaged one is made again, and one of
another signature only with --overwrite (which makes the shard again in any case). The
shard comes from `--shard i/N` (Slurm arrays, Ray or Spark tasks, plain shell loops), or
from torchrun's RANK and WORLD_SIZE.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Iterable, Iterator, List, Optional, Tuple

import h5py
import numpy as np

from ..checksums import ArraysDigest
from ..errors import ElmoError, Errors, first_line
from ..files.atomic import atomic_write
from .files import SENTENCE_INDEX, write_datasets

SIGNATURE = "signature"  # attribute of a shard file: its input, settings and weights
N_LINES = "n_lines"  # attribute of a shard file: the lines INPUT has in all
DATA_CHECKSUM = "data_sha256"  # attribute of a shard file: over its datasets and index
# What a shard file is found to be (`shard_state`)
MISSING, DONE, OTHER, DAMAGED, UNREADABLE = ("missing", "done", "other", "damaged",
                                             "unreadable")


@dataclass(frozen=True)
class Shard:
    index: int
    count: int

    def takes(self, line: int) -> bool:
        """Whether the 0-based line number `line` is this shard's."""
        return line % self.count == self.index

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def parse_shard(text: str) -> Shard:
    """"i/N" -> Shard(i, N); E153 unless 0 <= i < N."""
    match = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text)
    if match is None or int(match[2]) < 1 or int(match[1]) >= int(match[2]):
        raise ElmoError(Errors.E153.format(value=text))
    return Shard(int(match[1]), int(match[2]))


def shard_from_env() -> Optional[Shard]:
    """The shard of a process that torchrun started (RANK of WORLD_SIZE > 1), else None;
    E273 for values that name no shard."""
    world = os.environ.get("WORLD_SIZE", "").strip() or "1"
    rank = os.environ.get("RANK", "").strip() or "0"
    if world.isdecimal() and int(world) <= 1:
        return None
    if not (world.isdecimal() and rank.isdecimal() and int(rank) < int(world)):
        raise ElmoError(Errors.E273.format(rank=os.environ.get("RANK"),
                                           world=os.environ.get("WORLD_SIZE")))
    return Shard(int(rank), int(world))


def shard_path(output: Path, shard: Shard) -> Path:
    return output.with_name(f"{output.name}.shard-{shard.index:05d}-of-{shard.count:05d}.hdf5")


def signature(input_path: Path, settings: Dict[str, Any]) -> str:
    """What a shard's vectors depend on: the input file (path, size, modification time) and
    the settings that change the vectors, the biLM's content digest among them."""
    st = input_path.stat()
    if not stat.S_ISREG(st.st_mode):
        raise ElmoError(Errors.E154.format(input=input_path))
    record = {"input": str(input_path.resolve()), "size": st.st_size,
              "mtime_ns": st.st_mtime_ns, **settings}
    return hashlib.sha256(json.dumps(record, sort_keys=True, default=str).encode()).hexdigest()


def shard_state(path: Path, sig: str, *, verify: bool = True) -> Tuple[str, str]:
    """What the shard file at `path` is, and a detail: MISSING; UNREADABLE (h5py cannot open
    it or its attributes); OTHER (made from another input, other settings or other weights
    than `sig`); DAMAGED (its data do not match the checksum written with it; checked only
    with `verify`, which reads them all); else DONE."""
    if not path.exists():
        return MISSING, ""
    try:
        with h5py.File(path, "r") as f:
            found = f.attrs.get(SIGNATURE)
            recorded = f.attrs.get(DATA_CHECKSUM)
            if found != sig:
                return OTHER, ""
            if not verify:
                return DONE, ""
            try:
                if recorded is None or _data_checksum(f) != recorded:
                    return DAMAGED, "its data do not match the checksum written with it"
            except (OSError, KeyError, ValueError, RuntimeError) as err:
                return DAMAGED, first_line(err)
    except (OSError, KeyError, ValueError, RuntimeError) as err:
        return UNREADABLE, first_line(err)
    return DONE, ""


def _data_checksum(f: h5py.File) -> str:
    """The checksum of a shard file: its datasets in line order, then its index."""
    digest = ArraysDigest()
    for name in sorted((n for n in f if n != SENTENCE_INDEX), key=int):
        digest.add(name, f[name][()])
    text = f[SENTENCE_INDEX][0]
    digest.add_text(SENTENCE_INDEX, text.decode("utf-8") if isinstance(text, bytes) else text)
    return digest.hexdigest()


def numbered(lines: Iterable[str], shard: Shard, total: List[int]) -> Iterator[Tuple[int, str]]:
    """This shard's (line number, line) pairs; `total` gets the count of all lines."""
    n = 0
    for n, line in enumerate(lines, start=1):
        if shard.takes(n - 1):
            yield n - 1, line
    total.append(n)


def write_shard(path: Path, items: Iterable[Tuple[int, str, np.ndarray]], sig: str,
                total: List[int]) -> int:
    """This shard's datasets, named by line number, with its own `sentence_to_index`, the
    signature, the total line count and the checksum of its data; atomically. Returns the
    number written."""
    digest = ArraysDigest()

    def datasets() -> Iterator[Tuple[str, str, np.ndarray]]:
        for k, sentence, array in items:
            digest.add(str(k), array)
            yield str(k), sentence, array

    def attrs(index_text: str) -> Dict[str, Any]:
        digest.add_text(SENTENCE_INDEX, index_text)
        return {SIGNATURE: sig, N_LINES: total[0], DATA_CHECKSUM: digest.hexdigest()}

    return write_datasets(path, datasets(), attrs)


def write_index(output: Path, count: int) -> int:
    """OUTPUT: a virtual dataset per line into the shard files (NaN where a shard file is
    missing when read), and the merged `sentence_to_index` (the last line of a repeated
    sentence, as one process writes it). Returns the number of lines."""
    sources: List[Tuple[str, Dict[str, Tuple[Tuple[int, ...], np.dtype]]]] = []
    index: Dict[str, int] = {}
    n_lines = 0
    for i in range(count):
        path = shard_path(output, Shard(i, count))
        with h5py.File(path, "r") as f:
            n_lines = int(f.attrs[N_LINES])
            shapes = {name: (f[name].shape, f[name].dtype) for name in f
                      if name != SENTENCE_INDEX}
            for sentence, name in json.loads(f[SENTENCE_INDEX][0]).items():
                index[sentence] = max(index.get(sentence, -1), int(name))
        sources.append((path.name, shapes))
    with atomic_write(output, ".hdf5") as tmp, h5py.File(tmp, "w") as out:
        for k in range(n_lines):
            name, shapes = sources[k % count]
            shape, dtype = shapes[str(k)]
            layout = h5py.VirtualLayout(shape=shape, dtype=dtype)
            layout[...] = h5py.VirtualSource(name, str(k), shape=shape)  # beside OUTPUT
            out.create_virtual_dataset(str(k), layout, fillvalue=np.nan)
        data = out.create_dataset(SENTENCE_INDEX, (1,), dtype=h5py.string_dtype())
        data[0] = json.dumps({s: str(k) for s, k in index.items()})
    return n_lines
