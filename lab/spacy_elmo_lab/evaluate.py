"""Evaluate every trained pipeline on the dev and test splits of its dataset.

  python -m spacy_elmo_lab.evaluate TRAINING_DIR CORPUS_DIR METRICS_DIR [--gpu-id N] [--only-new]

A run directory `training/<task>_<row>[_s<seed>]` (e.g. `ner_elmo_s0`, `sst5_cnn`) is
evaluated on `corpus/<dataset>/{dev,test}.spacy` (the task's dataset, as
`spacy_elmo_lab.run_table` names them; `ner` is CoNLL-2003). Writes `metrics/<run>.dev.json` and
`metrics/<run>.test.json`. `run_table.py` evaluates its own cells; this catches the rest
(e.g. runs trained by hand with `spacy train`). A table cell whose training did not finish
(its cell.running marker) is skipped with a note; spaCy leaves no sign of an interrupted
training by hand, so such runs are evaluated as they are.
"""

from __future__ import annotations

from pathlib import Path

import typer

from .results import complete
from .run_table import evaluate_run
from .table import TASK_DATASETS


def main(training: Path, corpus: Path, metrics: Path, gpu_id: int = -1,
         only_new: bool = False) -> None:
    """--only-new skips runs whose metrics are newer than their model-best."""
    for run in sorted(p for p in training.iterdir() if (p / "model-best").exists()):
        dataset = TASK_DATASETS.get(run.name.split("_")[0])
        if dataset is None:
            continue
        if not complete(run):
            typer.echo(f"{run.name}: skipped, a table cell whose training did not finish: "
                       "run the table's command again", err=True)
            continue
        test = metrics / f"{run.name}.test.json"
        if only_new and test.exists() and (test.stat().st_mtime >
                                           (run / "model-best" / "meta.json").stat().st_mtime):
            continue
        scores = evaluate_run(run, corpus / dataset, metrics, gpu_id)
        typer.echo(f"{run.name}: " + ", ".join(f"{k} {v:.1f}" for k, v in scores.items()))


if __name__ == "__main__":
    typer.run(main)
