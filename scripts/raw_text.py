"""Raw text as JSONL for `spacy pretrain`: one {"text": ...} object per non-empty line.

  python scripts/raw_text.py INPUT OUTPUT [--limit N] [--skip-pattern REGEX]

INPUT may be plain, .gz or .xz. Title lines of the Wikipedia dumps (`= ... =`) are skipped by
default, as in the biLM pretraining config, so both pretraining methods see the same text.
"""

from __future__ import annotations

import gzip
import lzma
import re
from pathlib import Path
from typing import IO

import srsly
import typer


def _open(path: Path) -> IO[str]:
    if path.suffix == ".gz":
        return gzip.open(path, "rt", encoding="utf-8")
    if path.suffix == ".xz":
        return lzma.open(path, "rt", encoding="utf-8")
    return open(path, encoding="utf-8")


def main(input_path: Path, output: Path, limit: int = 0,
         skip_pattern: str = r"^= .* =$") -> None:
    skip = re.compile(skip_pattern) if skip_pattern else None

    def lines():
        n = 0
        with _open(input_path) as f:
            for line in f:
                text = line.strip()
                if not text or (skip is not None and skip.match(text)):
                    continue
                yield {"text": text}
                n += 1
                if limit and n >= limit:
                    return

    output.parent.mkdir(parents=True, exist_ok=True)
    srsly.write_jsonl(output, lines())
    typer.echo(f"{input_path} -> {output}")


if __name__ == "__main__":
    typer.run(main)
