"""Split a text corpus into train and dev files: every N-th line goes to dev.

  python -m spacy_elmo_lab.holdout INPUT TRAIN_OUT DEV_OUT [--every 100]

INPUT may be plain, .gz or .xz, in UTF-8 (a byte order mark is dropped); the outputs are
written gzip-compressed when their names end in .gz. Used for corpora without a dev split
(the Chinese pretraining text). The arguments are checked before anything is written, and
the outputs are written atomically: a failed or interrupted run leaves the old ones.
"""

from __future__ import annotations

import gzip
import io
import lzma
from pathlib import Path
from typing import IO

import typer

from spacy_elmo.files.atomic import atomic_write
from spacy_elmo.files.guard import guard_output
from spacy_elmo.pretrain.corpus import first_undecodable_line, open_text

from .messages import one_line_errors, user_errors


class _BareGzip(gzip.GzipFile):
    """gzip with no file name or time in its header: the same lines give the same bytes,
    so a rerun does not look like new data to `spacy project` (its deps are checksums)."""

    def __init__(self, path: Path) -> None:
        self._raw = open(path, "wb")
        super().__init__(filename="", mode="wb", fileobj=self._raw, mtime=0)

    def close(self) -> None:
        try:
            super().close()
        finally:
            self._raw.close()


def create_text(path: Path, like: Path) -> IO[str]:
    """Write `path` as UTF-8 text, compressed as the name of `like` says."""
    if like.suffix == ".gz":
        return io.TextIOWrapper(_BareGzip(path), encoding="utf-8")
    if like.suffix == ".xz":
        return lzma.open(path, "wt", encoding="utf-8")  # type: ignore[return-value]
    return open(path, "w", encoding="utf-8")


def _check(input_path: Path, train_out: Path, dev_out: Path, every: int,
           overwrite: bool = False) -> None:
    if every < 2:
        raise typer.BadParameter(f"--every must be 2 or more (every N-th line goes to dev), "
                                 f"not {every}")
    if not input_path.is_file():
        raise typer.BadParameter(f"no such file: {input_path}")
    try:
        open(input_path, "rb").close()
    except OSError as err:
        raise typer.BadParameter(f"cannot read {input_path}: {err.strerror}") from None
    if train_out.resolve() == dev_out.resolve():
        raise typer.BadParameter("TRAIN_OUT and DEV_OUT must be different files")
    with user_errors():  # an output that is the input (E025), or exists (E026)
        for out, what in ((train_out, "TRAIN_OUT"), (dev_out, "DEV_OUT")):
            guard_output(out, inputs=[input_path], overwrite=overwrite, what=what)


def main(input_path: Path, train_out: Path, dev_out: Path, every: int = 100,
         overwrite: bool = False) -> None:
    """Every N-th line of INPUT_PATH to DEV_OUT, the others to TRAIN_OUT (--overwrite:
    replace existing outputs)."""
    _check(input_path, train_out, dev_out, every, overwrite)
    n_train = n_dev = 0
    try:
        with atomic_write(train_out) as train_tmp, atomic_write(dev_out) as dev_tmp:
            with open_text(input_path) as src, create_text(train_tmp, like=train_out) as train, \
                    create_text(dev_tmp, like=dev_out) as dev:
                for i, line in enumerate(src):
                    if (i + 1) % every == 0:
                        dev.write(line)
                        n_dev += 1
                    else:
                        train.write(line)
                        n_train += 1
            if n_dev == 0:
                raise typer.BadParameter(
                    f"{input_path} has {n_train} lines, fewer than --every {every}: none would "
                    f"go to {dev_out}; use a smaller --every")
    except UnicodeDecodeError:
        bad = first_undecodable_line(input_path)
        where = f"{input_path}:{bad}" if bad else str(input_path)
        raise typer.BadParameter(f"{where}: not UTF-8; convert the file to UTF-8 first (the "
                                 "outputs were left as they were)") from None
    except (EOFError, gzip.BadGzipFile, lzma.LZMAError) as err:
        raise typer.BadParameter(f"cannot read {input_path}: {err or type(err).__name__} (is "
                                 "it damaged, or not compressed as its name says?); the "
                                 "outputs were left as they were") from None
    typer.echo(f"{input_path}: {n_train} lines -> {train_out}, {n_dev} lines -> {dev_out}")


if __name__ == "__main__":
    typer.run(one_line_errors(main))
