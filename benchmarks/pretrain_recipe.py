"""Which pretraining recipe learns most per CPU-hour? Equal time budgets, one after another.

    python benchmarks/pretrain_recipe.py DATA_DIR --cpu-minutes 16 [--wic WIC_DIR]
        [--recipes bilm-tf,adam-1e-3,...] [--runs runs/recipe]
        [--out benchmarks/results/pretrain_recipe.md]

Every recipe starts from `configs/pretrain_en_first.cfg` (the first bundled biLM's shape and
recipe) with a few settings changed, reads DATA_DIR/lm_en, shares one softmax vocabulary
(so dev perplexities compare), and trains for the same CPU time of training steps
(`--max-cpu-minutes`: process CPU time, both threads, so that other work on a shared machine
does not shorten one recipe's budget; dev evaluations are not counted), 2 threads, never two
at once. At the end:
full-softmax dev perplexity and, with --wic, the WiC probe's dev accuracy (layer chosen on
train). Rerunning skips finished recipes and resumes an interrupted one (and, with a larger
--cpu-minutes, continues finished ones), so the study continues across sessions. Writes a
table and a figure (dev perplexity against minutes, one line per recipe).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List

from spacy_elmo.files.atomic import atomic_write, write_text
from spacy_elmo.files.json_io import write_json
from spacy_elmo.pretrain.config import PretrainConfig
from spacy_elmo.pretrain.rundir import read_metrics

ROOT = Path(__file__).resolve().parents[1]
BASE = ROOT / "configs" / "pretrain_en_first.cfg"

# name -> (settings changed from BASE, why it is in the study)
RECIPES: Dict[str, Any] = {
    "bilm-tf": ({}, "the bundled biLM's recipe: Adagrad 0.2, 64 rows, window 20, 4096 "
                    "negatives"),
    "adam-1e-3": ({"optimizer": "adam", "lr": 1e-3, "warmup_steps": 200},
                  "Adam with warmup"),
    "adam-3e-3": ({"optimizer": "adam", "lr": 3e-3, "warmup_steps": 200},
                  "Adam, a larger rate"),
    "lazyadam-1e-3": ({"optimizer": "lazyadam", "lr": 1e-3, "warmup_steps": 200},
                      "Adam whose softmax rows move only when sampled"),
    "lazyadam-3e-3": ({"optimizer": "lazyadam", "lr": 3e-3, "warmup_steps": 200},
                      "the same, a larger rate"),
    "lazyadam-1e-3-reset": ({"optimizer": "lazyadam", "lr": 1e-3, "warmup_steps": 200,
                             "state_reset": 0.1},
                            "lazy Adam, each row's state zeroed with probability 0.1 a window"),
    "adagrad-0.4": ({"lr": 0.4}, "Adagrad, twice the rate"),
    "neg-1024": ({"n_negatives": 1024}, "a quarter of the negatives: cheaper softmax"),
    "rows-128": ({"batch_size": 128}, "twice the rows per step"),
    "window-35": ({"window": 35}, "longer BPTT windows"),
    "proj-256": ({"options": {"projection_dim": 256}}, "a wider projection (and token "
                 "vectors)"),
}


def recipe_config(name: str, data_dir: Path, runs: Path, vocab: Path, cpu_minutes: float
                  ) -> Dict[str, Any]:
    base = PretrainConfig.from_file(BASE).to_dict()
    changes, _ = RECIPES[name]
    config = {**base, **{k: v for k, v in changes.items() if k != "options"}}
    config["options"] = {**base["options"], **changes.get("options", {})}
    config.update({
        "train": [str(data_dir / "lm_en" / "enwiki_core.train.*.txt.xz")],
        "dev": [str(data_dir / "lm_en" / "enwiki_core.valid.txt.xz")],
        "output": str(runs / name), "vocab": str(vocab), "max_steps": 10_000_000,
        "max_cpu_minutes": cpu_minutes, "eval_every": 250, "threads": 2, "shuffle_buffer": 10_000,
        "checkpoint_every": 1000, "checkpoint_minutes": 5, "snapshot_every": None,
    })
    return config


def make_vocab(data_dir: Path, runs: Path) -> Path:
    """The shared softmax vocabulary, counted once as the bundled biLM's run did."""
    from spacy_elmo.pretrain.corpus import resolve_files
    from spacy_elmo.pretrain.vocab import build_vocab

    path = runs / "vocab.txt"
    if not path.exists():
        config = PretrainConfig.from_file(
            BASE, train=[str(data_dir / "lm_en" / "enwiki_core.train.*.txt.xz")])
        runs.mkdir(parents=True, exist_ok=True)
        build_vocab(resolve_files(config.train), config.text_settings(),
                    size=config.vocab_size, min_count=config.min_count,
                    max_tokens=config.vocab_max_tokens).to_file(path)
    return path


def run_recipe(name: str, config: Dict[str, Any]) -> None:
    run = Path(config["output"])
    metrics = run / "metrics.jsonl"
    if (run / "model" / "weights.hdf5").exists() and metrics.exists():
        spent = max((r.get("cpu_s", 0.0) for r in read_metrics(metrics)), default=0.0)
        if spent >= 60 * config["max_cpu_minutes"]:
            return  # finished earlier (a larger --cpu-minutes continues it)
    run.mkdir(parents=True, exist_ok=True)
    config_path = run.parent / f"{name}.cfg"
    write_text(config_path, PretrainConfig(**config).to_cfg())
    env = {**os.environ, "OMP_WAIT_POLICY": "PASSIVE"}
    subprocess.run([sys.executable, "-m", "spacy_elmo", "pretrain", str(config_path),
                    "--resume"], check=True, env=env)
    write_json(run / "load.json", {"load": os.getloadavg()[0]})


def summary(name: str, run: Path, wic_dir: Path | None) -> Dict[str, Any]:
    records = read_metrics(run / "metrics.jsonl")
    train = [r for r in records if r["type"] == "train"]
    dev = [r for r in records if r["type"] == "dev"]
    row: Dict[str, Any] = {
        "recipe": name, "why": RECIPES[name][1], "steps": train[-1]["step"],
        "tokens": train[-1]["tokens"], "minutes": train[-1]["elapsed_s"] / 60,
        "tokens_per_s": train[-1]["tokens"] / max(train[-1]["elapsed_s"], 1e-9),
        "tokens_per_cpu_s": train[-1]["tokens"] / max(train[-1]["cpu_s"], 1e-9),
        "dev_ppl": dev[-1]["dev_ppl"], "dev_ppl_fwd": dev[-1]["dev_ppl_fwd"],
        "dev_ppl_bwd": dev[-1]["dev_ppl_bwd"], "load": json.loads(
            (run / "load.json").read_text(encoding="utf-8"))["load"]
        if (run / "load.json").exists() else float("nan"),
        "curve": [(r.get("cpu_s", 0.0) / 60, r["dev_ppl"]) for r in dev]}
    if wic_dir is not None:
        wic_json = run / f"wic_step{train[-1]['step']}.json"  # a longer budget: probe again
        if not wic_json.exists():
            subprocess.run([sys.executable, "-m", "spacy_elmo_lab.wic",
                            str(run / "model"), str(wic_dir), "--json", str(wic_json)],
                           check=True, stdout=subprocess.DEVNULL)
        rows = json.loads(wic_json.read_text(encoding="utf-8"))
        chosen = max(rows, key=lambda r: r["train"])
        row["wic_dev"] = chosen["dev"]
        row["wic_layer"] = chosen["layer"]
    return row


def plot(rows: List[Dict[str, Any]], png: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for row in rows:
        points = [p for p in row["curve"] if p[0] > 0]
        ax.plot([p[0] for p in points], [p[1] for p in points], marker=".", label=row["recipe"])
    ax.set(xlabel="CPU minutes of training steps (2 threads)",
           ylabel="dev perplexity (lm_en)", yscale="log",
           title="Pretraining recipes at equal CPU time")
    ax.legend(fontsize=8)
    fig.tight_layout()
    with atomic_write(png, suffix=".png") as tmp:
        fig.savefig(tmp, dpi=100)
    plt.close(fig)


def report(rows: List[Dict[str, Any]], args: argparse.Namespace, command: str) -> str:
    lines = ["# Pretraining recipes at equal CPU time", "", f"Command: `{command}`", "",
             f"{datetime.date.today().isoformat()}. Each recipe: configs/pretrain_en_first.cfg "
             f"with the changes listed, {args.cpu_minutes:g} CPU minutes of training steps "
             "(process CPU time, both threads), 2 threads, "
             "one run at a time, the same 50k softmax vocabulary, dev = the first 30,000 "
             "tokens of enwiki_core.valid (full softmax). WiC: dev accuracy of the layer "
             "chosen on train. 'load after': the 1-minute load average when the run ended "
             "(2 cores; above 2 means other work shared them).", "",
             "| recipe | changes | steps | tokens | tokens per CPU-s | tokens/s (wall) | "
             "dev perplexity (forward / backward) | WiC dev | load after |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in sorted(rows, key=lambda r: r["dev_ppl"]):
        changes = json.dumps(RECIPES[r["recipe"]][0]) or "-"
        wic = f"{r['wic_dev']:.1f} (layer {r['wic_layer']})" if "wic_dev" in r else "-"
        lines.append(f"| {r['recipe']} | `{changes}` | {r['steps']:,} | {r['tokens']:,} | "
                     f"{r['tokens_per_cpu_s']:,.0f} | {r['tokens_per_s']:,.0f} | "
                     f"{r['dev_ppl']:.1f} ({r['dev_ppl_fwd']:.1f} / {r['dev_ppl_bwd']:.1f}) | "
                     f"{wic} | "
                     f"{r['load']:.1f} |")
    lines += ["", f"![dev perplexity against CPU minutes]({args.out.with_suffix('.png').name})",
              ""]
    return "\n".join(lines)


def main(argv: List[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("data_dir", type=Path)
    parser.add_argument("--cpu-minutes", type=float, default=16.0)
    parser.add_argument("--wic", type=Path, default=None)
    parser.add_argument("--recipes", default=",".join(RECIPES))
    parser.add_argument("--runs", type=Path, default=Path("runs/recipe"))
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" /
                        "pretrain_recipe.md")
    args = parser.parse_args(argv)
    names = args.recipes.split(",")
    unknown = [n for n in names if n not in RECIPES]
    if unknown:
        parser.error(f"unknown recipes {unknown}; known: {list(RECIPES)}")
    vocab = make_vocab(args.data_dir, args.runs)
    rows = []
    for name in names:
        run_recipe(name, recipe_config(name, args.data_dir, args.runs, vocab,
                                       args.cpu_minutes))
        rows.append(summary(name, args.runs / name, args.wic))
        text = report(rows, args, "python benchmarks/pretrain_recipe.py " + " ".join(argv))
        args.out.parent.mkdir(parents=True, exist_ok=True)
        write_text(args.out, text)
        plot(rows, args.out.with_suffix(".png"))
        print(text, flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
