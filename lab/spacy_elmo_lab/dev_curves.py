"""Where each row of a table stops rising: the dev curve of every cell, read from the table
printed in its spaCy training log (training/<run>/train.log), the mean over its seeds.

  python -m spacy_elmo_lab.dev_curves TRAINING [RUN_PREFIX ...] [--output FILE] [--overwrite]

Each row (`<task>_<row>`: its finished cells, seeds `_s0`, `_s1`, ... together) gets its
mean dev score at every evaluation its seeds all reached, each seed's best and last step
(the budget, or where the config's patience ended it), and whether it still rises at the
end (a seed's best is its last evaluation). The score is the task's main metric as spaCy prints
it: entity F (ENTS_F), the text classifier's score (CATS_SCORE), LAS (DEP_LAS), else spaCy's
weighted SCORE; percent throughout.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Dict, List, NamedTuple, Optional

import typer

from spacy_elmo.errors import ElmoError
from spacy_elmo.files.atomic import write_text
from spacy_elmo.files.guard import guard_output

from .errors import Errors
from .messages import user_errors
from .results import CELL_DONE, parse_run

METRICS = ("ENTS_F", "CATS_SCORE", "DEP_LAS")  # the first a log has is its task's
ANSI = re.compile(r"\x1b\[[0-9;]*m")
EVALUATION = re.compile(r"^\s*\d+\s+\d+\s")  # "  3    2500   ...": epoch, step, ...
Curve = Dict[int, float]  # step -> dev score (percent)


def read_curve(log: Path) -> Curve:
    """The dev score at each evaluation of one `spacy train` log."""
    header: List[str] = []
    name = "SCORE"
    curve: Curve = {}
    for line in ANSI.sub("", log.read_text(encoding="utf-8", errors="replace")).splitlines():
        if line.startswith("E ") and "SCORE" in line:
            header = re.split(r"\s{2,}", line.strip())
            name = next((m for m in METRICS if m in header), "SCORE")
        elif header and EVALUATION.match(line):
            values = line.split()
            if len(values) != len(header):
                continue
            row = dict(zip(header, values, strict=True))
            score = float(row[name])
            curve[int(row["#"])] = score * 100 if name == "SCORE" else score
    if not curve:
        raise ElmoError(Errors.E290.format(path=log))
    return curve


def row_curves(training: Path, prefixes: List[str]) -> Dict[str, List[Curve]]:
    """Each row's curves, one per seed, for the finished cells under `training` (a cell.json
    beside the log) whose run starts with one of `prefixes` (all runs without)."""
    rows: Dict[str, List[Curve]] = {}
    for log in sorted(training.glob("*/train.log")):
        run = log.parent.name
        if not (log.parent / CELL_DONE).exists():
            continue  # running, stopped or failed: its curve would end early
        if prefixes and not any(run.startswith(p) for p in prefixes):
            continue
        dataset, model, _ = parse_run(run)
        rows.setdefault(f"{dataset}_{model}", []).append(read_curve(log))
    return rows


class Summary(NamedTuple):
    mean: Curve  # over the steps every seed reached
    best: List[int]  # each seed's best step (a tie: the earlier)
    last: List[int]  # each seed's last evaluation (the budget, or where patience ended it)
    rising: bool  # a seed's best is its last evaluation: the budget stopped it, not the curve


def summarize(curves: List[Curve]) -> Summary:
    """A row's curves, one per seed, in brief."""
    steps = sorted(set.intersection(*(set(c) for c in curves)))
    best = [_best_step(c) for c in curves]
    last = [max(c) for c in curves]
    return Summary({s: sum(c[s] for c in curves) / len(curves) for s in steps}, best, last,
                   any(b == end and len(c) > 1 for b, end, c in zip(best, last, curves,
                                                                  strict=True)))


def _best_step(curve: Curve) -> int:
    """The step of the best score (a tie: the earlier)."""
    return max(curve, key=lambda step: (curve[step], -step))


def table(rows: Dict[str, List[Curve]]) -> List[str]:
    lines = ["| row | seeds | dev by step (mean over the steps every seed reached) | best step "
             "(each seed) | last step (each seed) | still rising at the end |",
             "|---|---|---|---|---|---|"]
    for row, curves in rows.items():
        summary = summarize(curves)
        points = ", ".join(f"{s}: {v:.1f}" for s, v in summary.mean.items() if s > 0)
        best, last = (" / ".join(map(str, steps)) for steps in (summary.best, summary.last))
        lines.append(f"| {row} | {len(curves)} | {points} | {best} | {last} | "
                     f"{'yes' if summary.rising else 'no'} |")
    return lines


def main(training: Path = typer.Argument(..., help="The directory of the cells' runs"),
         prefixes: Optional[List[str]] = typer.Argument(
             None, help="Only runs whose name starts with one of these (e.g. ner_elmo)"),
         output: Optional[Path] = typer.Option(None, help="Write the table here too"),
         overwrite: bool = typer.Option(False, "--overwrite",
                                        help="Replace an existing --output")) -> None:
    """Print where each row's dev score stops rising."""
    with user_errors():
        if output is not None:  # a log (E025), an existing file without --overwrite (E026)
            guard_output(output, inputs=sorted(training.glob("*/train.log")),
                         overwrite=overwrite, what="--output")
        rows = row_curves(training, prefixes or []) if training.is_dir() else {}
        if not rows:
            which = f" whose run starts with {', '.join(prefixes)}" if prefixes else ""
            raise ElmoError(Errors.E291.format(path=training, which=which))
    command = " ".join(["python -m spacy_elmo_lab.dev_curves", str(training), *(prefixes or [])])
    lines = [f"Each row's dev curve from its cells' training logs (`{command}`):", "",
             *table(rows)]
    typer.echo("\n".join(lines))
    if output is not None:
        write_text(output, "\n".join(lines) + "\n")


if __name__ == "__main__":
    typer.run(main)
