"""The results table and the figures: scores side by side, and each task's layer mix.

  python scripts/compare.py METRICS_DIR TRAINING_DIR OUTPUT_DIR

Writes OUTPUT_DIR/results.md (dev and test scores of every run; NER: entity F1, textcat:
accuracy), OUTPUT_DIR/layer_weights.md and OUTPUT_DIR/layer_weights.png (softmax(w) and gamma
learned by each ELMo task: which biLM layer it leans on).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Dict, List, Tuple

import numpy as np
import spacy
import typer

NAMES = {"ner": "CoNLL-2003 NER (F1)", "wnut": "WNUT-17 NER (F1)",
         "sst5": "SST-5 (accuracy)", "trec": "TREC-6 (accuracy)",
         "msra": "MSRA NER (F1)", "weibo": "Weibo NER (F1)", "resume": "Resume NER (F1)",
         "thucnews": "THUCNews titles (accuracy)"}
MODELS = {"cnn": "spaCy CNN baseline", "cnnpre": "CNN + spacy pretrain",
          "elmo": "ELMo listener", "elmo_concat": "[spaCy features ; ELMo]"}


def _score(data: dict) -> float:
    if "ents_f" in data and data["ents_f"] is not None:
        return 100 * data["ents_f"]
    return 100 * data["cats_micro_f"]


def layer_mixes(training: Path) -> List[Tuple[str, str, np.ndarray, float]]:
    mixes = []
    for run in sorted(training.glob("*elmo*/model-best")):
        nlp = spacy.load(run)
        for name, proc in nlp.pipeline:
            model = getattr(proc, "model", None)
            if model is None or name == "elmo":
                continue
            for node in model.walk():
                if node.name == "elmo-scalar-mix" and node.has_param("w"):
                    w = np.asarray(node.get_param("w"))
                    probs = np.exp(w - w.max()) / np.exp(w - w.max()).sum()
                    mixes.append((run.parent.name, name, probs,
                                  float(node.get_param("gamma")[0])))
    return mixes


def main(metrics: Path, training: Path, output: Path) -> None:
    output.mkdir(parents=True, exist_ok=True)
    rows: Dict[Tuple[str, str], Dict[str, float]] = {}
    for path in sorted(metrics.glob("*.*.json")):  # <run>.<split>.json
        run, split = path.stem.rsplit(".", 1)
        dataset, model = run.split("_", 1)
        rows.setdefault((dataset, model), {})[split] = _score(json.loads(path.read_text()))
    lines = ["| task | model | dev | test |", "|---|---|---|---|"]
    for (dataset, model), scores in sorted(rows.items()):
        lines.append(f"| {NAMES.get(dataset, dataset)} | {MODELS.get(model, model)} | "
                     f"{scores.get('dev', float('nan')):.1f} | "
                     f"{scores.get('test', float('nan')):.1f} |")
    (output / "results.md").write_text("\n".join(lines) + "\n")
    typer.echo("\n".join(lines))
    mixes = layer_mixes(training)
    table = ["| run | component | softmax(w) per layer (token, LSTM 1, LSTM 2, ...) | gamma |",
             "|---|---|---|---|"]
    for run, component, probs, gamma in mixes:
        table.append(f"| {run} | {component} | {', '.join(f'{p:.3f}' for p in probs)} | "
                     f"{gamma:.3f} |")
    (output / "layer_weights.md").write_text("\n".join(table) + "\n")
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
        fig.savefig(output / "layer_weights.png", dpi=120)


if __name__ == "__main__":
    typer.run(main)
