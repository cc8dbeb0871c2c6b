"""Raw text as JSONL for `spacy pretrain`: one {"text": ...} object per non-empty line.

  python -m spacy_elmo_lab.raw_text INPUT OUTPUT [--limit N] [--skip-pattern REGEX]

INPUT may be plain, .gz or .xz, in UTF-8 (a byte order mark is dropped). Title lines of the
Wikipedia dumps (`= ... =`) are skipped by default, as in the biLM pretraining config, so both
pretraining methods see the same text. OUTPUT is written atomically: a failed or interrupted
run leaves the old one.
"""

from __future__ import annotations

import gzip
import lzma
import re
from pathlib import Path
from typing import Dict, Iterator, Optional

import srsly
import typer

from spacy_elmo.files.atomic import atomic_write
from spacy_elmo.files.guard import guard_output
from spacy_elmo.pretrain.corpus import first_undecodable_line, open_text

from .messages import one_line_errors, user_errors


def _check(input_path: Path, output: Path, limit: int, skip_pattern: str,
           overwrite: bool = False) -> Optional[re.Pattern[str]]:
    """The compiled skip pattern, after checking every argument (nothing is written yet)."""
    if limit < 0:
        raise typer.BadParameter(f"--limit must be 0 (all lines) or a positive count, not "
                                 f"{limit}")
    try:
        skip = re.compile(skip_pattern) if skip_pattern else None
    except re.error as err:
        raise typer.BadParameter(f"--skip-pattern {skip_pattern!r} is not a regular "
                                 f"expression: {err}") from None
    if not input_path.is_file():
        raise typer.BadParameter(f"no such file: {input_path}")
    try:
        open(input_path, "rb").close()
    except OSError as err:
        raise typer.BadParameter(f"cannot read {input_path}: {err.strerror}") from None
    with user_errors():  # the input (E025), an existing file (E026), a directory (E009)
        guard_output(output, inputs=[input_path], overwrite=overwrite, what="OUTPUT")
    return skip


def main(input_path: Path, output: Path, limit: int = 0,
         skip_pattern: str = r"^= .* =$",
         overwrite: bool = False) -> None:
    """One {"text": ...} line per kept line of INPUT_PATH (--overwrite: replace OUTPUT)."""
    skip = _check(input_path, output, limit, skip_pattern, overwrite)
    n = 0

    def lines() -> Iterator[Dict[str, str]]:
        nonlocal n
        with open_text(input_path) as f:
            for line in f:
                text = line.strip()
                if not text or (skip is not None and skip.match(text)):
                    continue
                yield {"text": text}
                n += 1
                if limit and n >= limit:
                    return

    try:
        with atomic_write(output, suffix=".jsonl") as tmp:
            srsly.write_jsonl(tmp, lines())
            if n == 0:
                raise typer.BadParameter(
                    f"{input_path} has no text lines to keep (it is empty, or every line is "
                    f"blank or matches --skip-pattern {skip_pattern!r}); {output} was left as "
                    "it was")
    except UnicodeDecodeError:
        bad = first_undecodable_line(input_path)
        where = f"{input_path}:{bad}" if bad else str(input_path)
        raise typer.BadParameter(f"{where}: not UTF-8; convert the file to UTF-8 first "
                                 f"({output} was left as it was)") from None
    except (EOFError, gzip.BadGzipFile, lzma.LZMAError) as err:
        raise typer.BadParameter(f"cannot read {input_path}: {err or type(err).__name__} (is "
                                 f"it damaged, or not compressed as its name says?); {output} "
                                 "was left as it was") from None
    typer.echo(f"{input_path} -> {output}: {n} lines")


if __name__ == "__main__":
    typer.run(one_line_errors(main))
