"""The UD table: every score of the UD pipelines (UPOS, XPOS, features, lemmas, UAS, LAS),
models down, scores across, from the metrics of the `ud` table's runs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable, Dict, List, Tuple

UD_DATASET = "ud"
# `spacy evaluate` key -> column
UD_SCORES = (("pos_acc", "UPOS"), ("tag_acc", "XPOS"), ("morph_acc", "Features"),
             ("lemma_acc", "Lemma"), ("dep_uas", "UAS"), ("dep_las", "LAS"))
UdRuns = Dict[str, Dict[int, Dict[str, Dict[str, float]]]]  # model -> seed -> split -> scores
RunParser = Callable[[str], Tuple[str, str, int]]  # run name -> (dataset, model, seed)


def collect_ud(metrics: Path, parse_run: RunParser) -> UdRuns:
    """Every UD score of METRICS/ud_<model>[_s<seed>].<split>.json, in percent."""
    runs: UdRuns = {}
    for path in sorted(metrics.glob(f"{UD_DATASET}_*.*.json")):
        run, split = path.stem.rsplit(".", 1)
        dataset, model, seed = parse_run(run)
        if dataset != UD_DATASET:
            continue
        data = json.loads(path.read_text(encoding="utf-8"))
        runs.setdefault(model, {}).setdefault(seed, {})[split] = {
            key: 100 * float(data[key]) for key, _ in UD_SCORES if data.get(key) is not None}
    return runs


def ud_table(runs: UdRuns, models: Dict[str, str]) -> List[str]:
    """Mean test scores over the seeds (and the mean dev LAS the models were selected on),
    with each row's LAS difference to the CNN baseline."""
    if not runs:
        return []
    order = [m for m in models if m in runs] + sorted(set(runs) - set(models))
    lines = ["| model | seeds | " + " | ".join(name for _, name in UD_SCORES)
             + " | dev LAS | LAS vs CNN |",
             "|---|---|" + "---|" * (len(UD_SCORES) + 2)]
    base = _means(runs.get("cnn", {}), "test")
    for model in order:
        test, dev = _means(runs[model], "test"), _means(runs[model], "dev")
        seeds = sorted(s for s, splits in runs[model].items() if "test" in splits)
        cells = [f"{test[key]:.2f}" if key in test else "-" for key, _ in UD_SCORES]
        diff = (f"{test['dep_las'] - base['dep_las']:+.2f}"
                if model != "cnn" and "dep_las" in test and "dep_las" in base else "")
        dev_las = f"{dev['dep_las']:.2f}" if "dep_las" in dev else "-"
        lines.append(f"| {models.get(model, model)} | {', '.join(map(str, seeds)) or '-'} | "
                     + " | ".join(cells) + f" | {dev_las} | {diff} |")
    return lines


def _means(seeds: Dict[int, Dict[str, Dict[str, float]]], split: str) -> Dict[str, float]:
    """The mean of each score over the seeds that have `split`."""
    values: Dict[str, List[float]] = {}
    for splits in seeds.values():
        for key, value in splits.get(split, {}).items():
            values.setdefault(key, []).append(value)
    return {key: sum(v) / len(v) for key, v in values.items()}

