"""Evaluate every trained pipeline on the dev and test splits of its dataset.

  python scripts/evaluate_all.py TRAINING_DIR CORPUS_DIR METRICS_DIR [--gpu-id N]

A run directory `training/<dataset>_<model>` (e.g. `ner_elmo`, `sst5_cnn`) is evaluated on
`corpus/<dataset>/{dev,test}.spacy`; `ner` means CoNLL-2003. Writes
`metrics/<run>.dev.json` and `metrics/<run>.test.json`.
"""

from __future__ import annotations

from pathlib import Path

import typer
from spacy.cli.evaluate import evaluate

DATASETS = {"ner": "conll", "wnut": "wnut", "sst5": "sst5", "trec": "trec", "msra": "msra",
            "weibo": "weibo", "resume": "resume", "thucnews": "thucnews",
            "thucnewsjieba": "thucnews_jieba"}


def main(training: Path, corpus: Path, metrics: Path, gpu_id: int = -1,
         only_new: bool = False) -> None:
    """--only-new skips runs whose metrics are newer than their model-best."""
    metrics.mkdir(parents=True, exist_ok=True)
    for run in sorted(p for p in training.iterdir() if (p / "model-best").exists()):
        dataset = DATASETS.get(run.name.split("_")[0])
        if dataset is None:
            continue
        for split in ("dev", "test"):
            data = corpus / dataset / f"{split}.spacy"
            out = metrics / f"{run.name}.{split}.json"
            if only_new and out.exists() and (out.stat().st_mtime >
                                              (run / "model-best" / "meta.json").stat().st_mtime):
                continue
            if data.exists():
                evaluate(str(run / "model-best"), data, output=out, use_gpu=gpu_id, silent=True)
                typer.echo(f"{run.name} {split}: {metrics / f'{run.name}.{split}.json'}")


if __name__ == "__main__":
    typer.run(main)
