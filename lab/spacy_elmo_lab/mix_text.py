"""Mix text corpora into one file, each at a weight, their lines spread evenly through it.

  python -m spacy_elmo_lab.mix_text OUTPUT INPUT... [--weights 1,0.25] [--seed 0] [--overwrite]

Pretraining reads its files one at a time, so a second corpus given as a second file is
read as one block. Mixed here, a line of each input takes its place by its position in its
own file (the k-th of n lines at k/n), and an input of weight w < 1 keeps each line with
probability w (seeded): a corpus weighted 0.25 is a quarter of itself, spread through the
whole output. Inputs may be plain, .gz or .xz UTF-8; the output is gzip-compressed when its
name ends in .gz, and written atomically.
"""

from __future__ import annotations

import heapq
import random
from pathlib import Path
from typing import Iterator, List, Optional, Tuple

import typer

from spacy_elmo.files.atomic import atomic_write
from spacy_elmo.files.guard import guard_output
from spacy_elmo.pretrain.corpus import open_text

from .holdout import create_text
from .messages import one_line_errors, user_errors


def parse_weights(weights: Optional[str], n_inputs: int) -> List[float]:
    """`--weights` as one number per input (default: 1 each), each in (0, 1]."""
    if weights is None:
        return [1.0] * n_inputs
    try:
        values = [float(w) for w in weights.split(",")]
    except ValueError:
        raise typer.BadParameter(f"--weights must be numbers separated by commas, not "
                                 f"{weights!r}") from None
    if len(values) != n_inputs:
        raise typer.BadParameter(f"--weights has {len(values)} number(s) for {n_inputs} "
                                 "input(s): give one per input")
    if not all(0 < w <= 1 for w in values):
        raise typer.BadParameter(f"each weight must be above 0 and at most 1, not {weights}")
    return values


def count_lines(path: Path) -> int:
    with open_text(path) as src:
        return sum(1 for _ in src)


def placed(path: Path, index: int, n_lines: int, weight: float,
           rng: random.Random) -> Iterator[Tuple[float, int, str]]:
    """The kept lines of one input, each keyed by its place in the input (k/n)."""
    with open_text(path) as src:
        for k, line in enumerate(src):
            if weight >= 1 or rng.random() < weight:
                yield (k + 0.5) / n_lines, index, line if line.endswith("\n") else line + "\n"


def main(output: Path, inputs: List[Path],
         weights: Optional[str] = typer.Option(None, help="one weight in (0, 1] per input, "
                                                          "comma-separated (default: 1 each)"),
         seed: int = 0, overwrite: bool = False) -> None:
    """Mix INPUTS into OUTPUT, each at its weight (--overwrite: replace OUTPUT)."""
    values = parse_weights(weights, len(inputs))
    for path in inputs:
        if not path.is_file():
            raise typer.BadParameter(f"no such file: {path}")
    with user_errors():  # an output that is an input (E025), or exists (E026)
        guard_output(output, inputs=list(inputs), overwrite=overwrite, what="OUTPUT")
    counts = [count_lines(path) for path in inputs]
    for path, n in zip(inputs, counts, strict=True):
        if n == 0:
            raise typer.BadParameter(f"{path} has no lines")
    kept = [0] * len(inputs)
    rngs = [random.Random(f"{seed}:{i}") for i in range(len(inputs))]
    with atomic_write(output) as tmp, create_text(tmp, like=output) as out:
        streams = [placed(p, i, n, w, r)
                   for i, (p, n, w, r) in enumerate(zip(inputs, counts, values, rngs, strict=True))]
        for _, index, line in heapq.merge(*streams):
            out.write(line)
            kept[index] += 1
    for path, n, k in zip(inputs, counts, kept, strict=True):
        typer.echo(f"{path}: {k} of {n} lines")
    typer.echo(f"-> {output}: {sum(kept)} lines")


if __name__ == "__main__":
    typer.run(one_line_errors(main))
