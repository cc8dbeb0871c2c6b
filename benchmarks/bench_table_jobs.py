"""Results-table cells one at a time (all cores each) against N at a time (cores / N each).

  python benchmarks/bench_table_jobs.py [--table en] [--tasks trec] [--rows cnn,elmo]
      [--seeds 0,1] [--jobs 2] [--max-steps 300] [--eval-frequency 100]
      [--out benchmarks/results/table_jobs.md]

Run from the project directory, on the corpora `spacy project run convert` wrote. The same
cells (`spacy_elmo_lab.run_table`'s commands, a shortened budget) are trained twice into a
temporary directory: first one at a time, as `--jobs 1` does, then `--jobs N`, and the wall
time of each pass, the ratio and every cell's training minutes are printed side by side,
with the matmul rate torch reaches on this machine before and after (a drop means other work
shared the CPU). Needs a quiet machine.
"""

from __future__ import annotations

import datetime
import json
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional

import typer
from bench_embed import matmul_rate  # benchmarks/bench_embed.py, beside this script
from spacy_elmo_lab.run_table import run_cells
from spacy_elmo_lab.table import make_cells

from spacy_elmo.bilm.hardware import cpu_model
from spacy_elmo.files.atomic import write_text


def main(table: str = "en", tasks: str = "trec", rows: str = "cnn,elmo", seeds: str = "0,1",
         jobs: int = 2, max_steps: int = 300, eval_frequency: int = 100,
         weights: str = "null", out: Optional[Path] = None) -> None:
    budget = ["--training.max_steps", str(max_steps), "--training.eval_frequency",
              str(eval_frequency), "--gpu-id", "-1"]
    values = {"weights": weights, "news_weights": weights, "jieba_weights": weights,
              "w2v": "null"}
    before = matmul_rate(1024, 1024, 1024, 5)
    walls: Dict[int, float] = {}
    minutes: Dict[int, Dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for n in (1, jobs):
            training, metrics = Path(tmp) / f"jobs{n}", Path(tmp) / f"jobs{n}_metrics"
            cells = make_cells(table, tasks.split(","), rows.split(","),
                               [int(s) for s in seeds.split(",")], values, budget, training)
            start = time.perf_counter()
            if run_cells(cells, training, metrics, -1, n):
                raise typer.Exit(1)
            records = {c.run: json.loads((training / c.run / "cell.json").read_text())
                       for c in cells}
            walls[n] = time.perf_counter() - start
            minutes[n] = {run: r["train_minutes"] for run, r in records.items()}
    after = matmul_rate(1024, 1024, 1024, 5)
    lines: List[str] = [
        f"# Table cells one at a time vs {jobs} at a time", "",
        f"`python benchmarks/bench_table_jobs.py --table {table} --tasks {tasks} --rows {rows} "
        f"--seeds {seeds} --jobs {jobs} --max-steps {max_steps} --eval-frequency "
        f"{eval_frequency}` ({datetime.date.today()}, {cpu_model()}; torch matmul "
        f"{before:.0f} GFLOP/s before, {after:.0f} after)", "",
        "| pass | wall (s) | vs one at a time |", "|---|---:|---:|",
        f"| 1 at a time, all cores each | {walls[1]:.0f} | 1.00x |",
        f"| {jobs} at a time, cores / {jobs} each | {walls[jobs]:.0f} | "
        f"{walls[1] / walls[jobs]:.2f}x |", "",
        f"| cell | train minutes, 1 at a time | {jobs} at a time |",
        "|---|---:|---:|"]
    lines += [f"| {run} | {m:.1f} | {minutes[jobs][run]:.1f} |" for run, m in minutes[1].items()]
    text = "\n".join(lines) + "\n"
    typer.echo(text)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        write_text(out, text)


if __name__ == "__main__":
    typer.run(main)
