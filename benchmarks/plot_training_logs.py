"""Dev score against training step, one panel per task, from saved `spacy train` output.

  python benchmarks/plot_training_logs.py OUTPUT.png LOG [LOG ...]

Each LOG is the console output of one `spacy train` run (or `spacy project run`) whose
command line names `--output training/<task>_<model>` (or whose file is named
`<task>_<model>.log`); the rows of spaCy's progress table
give the step (#) and the score (entity F1, micro-F (accuracy) for exclusive classes, or
spaCy's SCORE). Runs of the same task share a panel.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Dict, List, Tuple

import typer

from spacy_elmo.files.atomic import atomic_write

ROW = re.compile(r"^\s*\d+\s+(\d+)\s+[\d.\s]+$")
# the score to plot, by its distance from the end of the row (spaCy's column order)
COLUMNS = {"ENTS_F": 4, "CATS_MICRO_F": 2}
COLORS = {"cnn": "C0", "cnnpre": "C1", "elmo": "C2", "elmo_concat": "C3"}
OUTPUT = re.compile(r"--output training/(\w+?)_(\w+)")


def read_log(path: Path) -> Tuple[str, str, List[Tuple[int, float]]]:
    text = path.read_text(encoding="utf-8", errors="replace")
    found = OUTPUT.search(text) or OUTPUT.search(f"--output training/{path.stem}")
    task, model = found.groups() if found else (path.stem, "")
    from_end = next((k for name, k in COLUMNS.items() if f" {name} " in text), 1)
    points = []
    for line in text.splitlines():
        if ROW.match(line):
            values = line.split()
            score = float(values[-from_end])
            points.append((int(values[1]), score if from_end > 1 else 100 * score))
    return task, model, points


def main(output: Path, logs: List[Path]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tasks: Dict[str, List[Tuple[str, List[Tuple[int, float]]]]] = {}
    for log in logs:
        task, model, points = read_log(log)
        if points:
            tasks.setdefault(task, []).append((model, points))
    cols = min(len(tasks), 4)
    rows = math.ceil(len(tasks) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.6 * cols, 3.0 * rows), squeeze=False)
    for ax, (task, runs) in zip(axes.flat, sorted(tasks.items()), strict=False):
        for model, points in sorted(runs):
            ax.plot([p[0] for p in points], [p[1] for p in points], "o-", ms=3, label=model,
                    color=COLORS.get(model))
        ax.set_title(task)
        ax.set_xlabel("step")
        ax.set_ylabel("dev score")
        ax.legend(fontsize=7)
    for ax in list(axes.flat)[len(tasks):]:
        ax.axis("off")
    fig.tight_layout()
    with atomic_write(output, suffix=output.suffix) as tmp:
        fig.savefig(tmp, dpi=110)
    typer.echo(f"Wrote {output} ({len(logs)} logs, {len(tasks)} tasks)")


if __name__ == "__main__":
    typer.run(main)
