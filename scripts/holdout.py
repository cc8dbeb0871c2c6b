"""Split a text corpus into train and dev files: every N-th line goes to dev.

  python scripts/holdout.py INPUT TRAIN_OUT DEV_OUT [--every 100]

INPUT may be plain, .gz or .xz; the outputs are written gzip-compressed when their names end
in .gz. Used for corpora without a dev split (the Chinese pretraining text).
"""

from __future__ import annotations

import gzip
import lzma
from pathlib import Path
from typing import IO

import typer


def _open(path: Path, mode: str) -> IO[str]:
    if path.suffix == ".gz":
        return gzip.open(path, mode + "t", encoding="utf-8")
    if path.suffix == ".xz":
        return lzma.open(path, mode + "t", encoding="utf-8")
    return open(path, mode, encoding="utf-8")


def main(input_path: Path, train_out: Path, dev_out: Path, every: int = 100) -> None:
    train_out.parent.mkdir(parents=True, exist_ok=True)
    dev_out.parent.mkdir(parents=True, exist_ok=True)
    n_train = n_dev = 0
    with _open(input_path, "r") as src, _open(train_out, "w") as train, \
            _open(dev_out, "w") as dev:
        for i, line in enumerate(src):
            if (i + 1) % every == 0:
                dev.write(line)
                n_dev += 1
            else:
                train.write(line)
                n_train += 1
    typer.echo(f"{input_path}: {n_train} lines -> {train_out}, {n_dev} lines -> {dev_out}")


if __name__ == "__main__":
    typer.run(main)
