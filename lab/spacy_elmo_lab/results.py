"""The results table and the figures: scores side by side, and each task's layer mix.

  python -m spacy_elmo_lab.results METRICS_DIR TRAINING_DIR OUTPUT_DIR

Writes OUTPUT_DIR/results.md (models down, tasks across: test and dev scores of every run,
and the test difference to the CNN baseline; NER: entity F1, textcat: accuracy; the UD
pipelines: every score in a table of their own),
OUTPUT_DIR/layer_weights.md and OUTPUT_DIR/layer_weights.png (softmax(w) and gamma learned
by each ELMo task: which biLM layer it leans on).

Metrics are named `<dataset>_<model>[_s<seed>].<split>.json` (`spacy_elmo_lab.evaluate`); a
run without a seed suffix is seed 0. A cell with several seeds shows the mean test score,
each seed's test score in seed order and the mean dev score: `80.5 (80.0 / 81.0; dev 90.5)`;
its difference is between means.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import numpy as np
import spacy
import typer

from spacy_elmo.files.atomic import atomic_write, write_text
from spacy_elmo.ml.scalar_mix import scalar_mixes

from .ud import collect_ud, ud_table

NAMES = {"ner": "CoNLL-2003 NER (F1)", "wnut": "WNUT-17 NER (F1)",
         "sst5": "SST-5 (accuracy)", "trec": "TREC-6 (accuracy)",
         "msra": "MSRA NER (F1)", "weibo": "Weibo NER (F1)", "resume": "Resume NER (F1)",
         "thucnews": "THUCNews titles (accuracy)",
         "thucnewsjieba": "THUCNews titles, jieba words (accuracy)",
         "ud": "UD English EWT (LAS)"}
ENGLISH = ["ner", "wnut", "sst5", "trec"]
CHINESE = ["msra", "weibo", "resume", "thucnews", "thucnewsjieba"]
MODELS = {"cnn": "spaCy CNN baseline", "cnnpre": "CNN + spacy pretrain",
          "cnnw2vsame": "CNN + word2vec (same text)", "cnnw2vall": "CNN + word2vec (all lm_en)",
          "cnnw2v": "CNN + word2vec", "elmo": "ELMo listener",
          "elmo_news": "ELMo listener, news-adapted biLM",
          "elmo_ft": "ELMo listener, biLM fine-tuned (grad_factor 1)",
          "elmo_concat": "[spaCy features ; ELMo]",
          "elmo_concat_w2v": "[word2vec + features ; ELMo]",
          "cnnw2vall_bilstm": "CNN embed + word2vec (all lm_en), biLSTM encoder",
          "cnnw2v_bilstm": "CNN embed + word2vec, biLSTM encoder",
          "elmo_bilstm": "ELMo listener, biLSTM encoder",
          "elmo_bilstm_out": "ELMo listener, biLSTM encoder, [h ; ELMo]",
          "elmo_concat_bilstm": "[spaCy features ; ELMo], biLSTM encoder",
          "elmo_bilstm_attn": "ELMo listener, biLSTM encoder, attention pooling"}
# a table cell's run directory (spacy_elmo_lab.run_table): CELL_RUNNING while it trains and
# evaluates, CELL_DONE (its record) once it has
CELL_RUNNING, CELL_DONE = "cell.running", "cell.json"
SEED_SUFFIX = re.compile(r"^(?P<model>.+)_s(?P<seed>\d+)$")
Rows = Dict[Tuple[str, str], Dict[int, Dict[str, float]]]


def score(data: dict) -> float:
    """The table's figure of a `spacy evaluate` result: LAS for a parser (the UD table; its
    other scores in ud.py), entity F1, else micro-F (accuracy for exclusive classes), in
    percent."""
    if data.get("dep_las") is not None:
        return 100 * data["dep_las"]
    if "ents_f" in data and data["ents_f"] is not None:
        return 100 * data["ents_f"]
    return 100 * data["cats_micro_f"]


def complete(run_dir: Path) -> bool:
    """Whether a `spacy train` output may be evaluated and shown: not a table cell that is
    training or was stopped (CELL_RUNNING). spaCy leaves model-best and model-last behind
    an interrupted training too, so a run trained by hand always counts."""
    return not (run_dir / CELL_RUNNING).exists()


def layer_mixes(training: Path) -> List[Tuple[str, str, np.ndarray, float]]:
    """The learned layer mix of every finished ELMo run's components."""
    mixes = []
    for run in sorted(r for r in training.glob("*elmo*/model-best") if complete(r.parent)):
        nlp = spacy.load(run)
        for name, proc in nlp.pipeline:
            model = getattr(proc, "model", None)
            if model is None or name == "elmo":
                continue
            for node in scalar_mixes(model):
                if node.has_param("w"):
                    w = np.asarray(node.get_param("w"))
                    probs = np.exp(w - w.max()) / np.exp(w - w.max()).sum()
                    mixes.append((run.parent.name, name, probs,
                                  float(node.get_param("gamma")[0])))
    return mixes


def parse_run(run: str) -> Tuple[str, str, int]:
    """`<dataset>_<model>[_s<seed>]` -> (dataset, model, seed); no suffix is seed 0."""
    dataset, model = run.split("_", 1)
    match = SEED_SUFFIX.match(model)
    if match is None:
        return dataset, model, 0
    return dataset, match["model"], int(match["seed"])


def collect(metrics: Path) -> Rows:
    """(dataset, model) -> seed -> split -> score, from METRICS/<run>.<split>.json."""
    rows: Rows = {}
    origin: Dict[Tuple[str, str, int, str], str] = {}
    for path in sorted(metrics.glob("*.*.json")):
        run, split = path.stem.rsplit(".", 1)
        dataset, model, seed = parse_run(run)
        key = (dataset, model, seed, split)
        if key in origin:
            raise typer.BadParameter(
                f"{origin[key]} and {path.name} are both seed {seed} of {dataset}_{model} "
                f"(a run without a seed suffix is seed 0): remove one")
        origin[key] = path.name
        rows.setdefault((dataset, model), {}).setdefault(seed, {})[split] = score(
            json.loads(path.read_text()))
    return rows


def _mean(runs: Dict[int, Dict[str, float]], split: str,
          seeds: Optional[List[int]] = None) -> Optional[float]:
    """The mean score of `split` over the seeds that have it (of `seeds` only, if given)."""
    values = [scores[split] for seed, scores in runs.items()
              if split in scores and (seeds is None or seed in seeds)]
    return sum(values) / len(values) if values else None


def _seeds(runs: Dict[int, Dict[str, float]], split: str = "test") -> List[int]:
    return sorted(seed for seed, scores in runs.items() if split in scores)


def _cell(runs: Dict[int, Dict[str, float]], n_seeds: int = 1) -> str:
    """Test (dev) of one seed, or the mean test (each seed's; mean dev) of several; the dev
    mean is over the seeds that have a test score. Fewer seeds than the table's most
    (`n_seeds`) are named, so a one-seed cell is not read as a mean."""
    seeds = _seeds(runs) or None
    test, dev = _mean(runs, "test"), _mean(runs, "dev", seeds)
    fmt = "-" if test is None else f"{test:.1f}"
    fmt_dev = "-" if dev is None else f"{dev:.1f}"
    if len(runs) == 1:
        cell = f"{fmt} ({fmt_dev})"
    else:
        per_seed = " / ".join(f"{runs[s]['test']:.1f}" if "test" in runs[s] else "-"
                              for s in sorted(runs))
        cell = f"{fmt} ({per_seed}; dev {fmt_dev})"
    if seeds is not None and len(seeds) < n_seeds:
        cell += f" [seed{'s' if len(seeds) > 1 else ''} {', '.join(map(str, seeds))} only]"
    return cell


def score_table(rows: Rows, datasets: List[str]) -> List[str]:
    """Models down, tasks across; each cell: test score (dev score), or with several seeds
    the mean test score (each seed's; mean dev score), and the test difference to the CNN
    baseline: of the means over the seeds both rows have."""
    present = [d for d in datasets if any(key[0] == d for key in rows)]
    if not present:
        return []
    models = [m for m in MODELS if any((d, m) in rows for d in present)]
    models += sorted({m for d, m in rows if d in present} - set(models))
    n_seeds = max(len(_seeds(runs)) for (d, _), runs in rows.items() if d in present)
    lines = ["| model | " + " | ".join(NAMES.get(d, d) for d in present) + " |",
             "|---|" + "---|" * len(present)]
    for model in models:
        cells = []
        for dataset in present:
            runs = rows.get((dataset, model), {})
            if not any("test" in r or "dev" in r for r in runs.values()):
                cells.append("-")
                continue
            cell = _cell(runs, n_seeds)
            baseline = rows.get((dataset, "cnn"), {})
            common = sorted(set(_seeds(runs)) & set(_seeds(baseline)))
            mine, base = _mean(runs, "test", common), _mean(baseline, "test", common)
            if model != "cnn" and mine is not None and base is not None:
                cell += f" {mine - base:+.1f}"
            cells.append(cell)
        lines.append(f"| {MODELS.get(model, model)} | " + " | ".join(cells) + " |")
    return lines


def main(metrics: Path, training: Path, output: Path) -> None:
    output.mkdir(parents=True, exist_ok=True)
    rows = collect(metrics)
    lines = ["Test score (dev score) of the model selected on dev; with several seeds, the mean "
             "test score (each seed's test score, in seed order; the mean dev score). The "
             "signed figure is the test difference to the spaCy CNN baseline (of the means "
             "over the seeds both have); a cell with fewer seeds than others names its seeds.",
             ""]
    for title, datasets in (("English", ENGLISH), ("Chinese", CHINESE)):
        table = score_table(rows, datasets)
        if table:
            lines += [f"### {title}", ""] + table + [""]
    table = ud_table(collect_ud(metrics, parse_run), MODELS)
    if table:
        lines += ["### UD English EWT (test scores, mean over the seeds; models selected on dev "
                  "by the configs' score weights)", ""] + table + [""]
    write_text(output / "results.md", "\n".join(lines))
    typer.echo("\n".join(lines))
    mixes = layer_mixes(training)
    table = ["| run | component | softmax(w) per layer (token, LSTM 1, LSTM 2, ...) | gamma |",
             "|---|---|---|---|"]
    for run, component, probs, gamma in mixes:
        table.append(f"| {run} | {component} | {', '.join(f'{p:.3f}' for p in probs)} | "
                     f"{gamma:.3f} |")
    write_text(output / "layer_weights.md", "\n".join(table) + "\n")
    typer.echo("\n".join(table))
    if mixes:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        n_layers = len(mixes[0][2])
        fig, ax = plt.subplots(figsize=(7, 4))
        width = 0.8 / len(mixes)
        for k, (run, component, probs, _) in enumerate(mixes):
            ax.bar(np.arange(len(probs)) + k * width, probs, width, label=f"{run}/{component}")
        ax.axhline(1.0 / n_layers, color="gray", linestyle="--", linewidth=1,
                   label="uniform (the start)")
        ax.set_xticks(np.arange(n_layers) + 0.4 - width / 2)
        ax.set_xticklabels(["token layer"] + [f"LSTM {i}" for i in range(1, n_layers)])
        ax.set_ylabel("softmax(w)")
        ax.set_ylim(0, 1.3 * max(float(m[2].max()) for m in mixes))
        ax.set_title("Which biLM layer each task leans on")
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.1), ncol=3)
        fig.tight_layout()
        with atomic_write(output / "layer_weights.png", suffix=".png") as tmp:
            fig.savefig(tmp, dpi=120)


if __name__ == "__main__":
    typer.run(main)
