"""Does a wider biLM learn more than the same one, at equal CPU time, both from one trained biLM?

    python benchmarks/widen_study.py DATA_DIR [--start benchmarks/results/en_long/export]
        [--lstm-dim 1024] [--cpu-minutes 60] [--runs runs/widen]
        [--out benchmarks/results/widen_study.md]

(the default start is the long English run's export, out of the tree since it finished:
`git checkout 4e54c30 -- benchmarks/results/en_long/export` puts it back)

Two arms continue START on DATA_DIR/lm_en with the long English run's config and one recipe
(lazy Adam 3e-4 after a 500-step warmup, constant, seed 5): `same` keeps START's shape,
`wideN` trains `spacy-elmo widen OUT --lstm-dim N --weights START`, which computes what
START does. Both run at once, one thread each (two cores), until each has spent
--cpu-minutes of process CPU time on training steps: the same budget, each arm on half the
machine.
Then: dev perplexity (full softmax, every 1,000 steps) against CPU minutes, and at the end
WiC dev (layer chosen on train), nearest-neighbour WSD on SemEval-2007 and XPOS dev (best
layers), START's beside them. Rerunning resumes unfinished arms and reuses probe results
(kept in the runs directory); a larger --cpu-minutes continues both.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional

from spacy_elmo_lab.probe_pos import cached_probe as pos_probe
from spacy_elmo_lab.probe_wsd import cached_probe as wsd_probe
from spacy_elmo_lab.probes import best_layer, probe_data
from spacy_elmo_lab.wic import cached_probe as wic_probe
from spacy_elmo_lab.wic import chosen

from spacy_elmo.bilm import load_bilm
from spacy_elmo.bilm.hardware import cpu_isa, cpu_model
from spacy_elmo.files.atomic import write_text
from spacy_elmo.pretrain.config import PretrainConfig
from spacy_elmo.pretrain.perplexity import PerplexityJob
from spacy_elmo.pretrain.rundir import read_metrics

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "configs" / "pretrain_en_long.cfg"
RECIPE = ["--max-steps", "100000", "--optimizer.lr", "0.0003", "--optimizer.warmup_steps",
          "500", "--optimizer.lr_schedule", "constant", "--training.seed", "5",
          "--training.eval_every", "1000", "--training.snapshot_every", "null",
          "--system.threads", "1", "--system.precision", "fp32"]


def arm_command(data: Path, output: Path, init: Path, cpu_minutes: float,
                lstm_dim: Optional[int]) -> List[str]:
    shape = [] if lstm_dim is None else ["--model.options.lstm_dim", str(lstm_dim)]
    return [sys.executable, "-m", "spacy_elmo", "pretrain", str(CONFIG),
            str(data / "lm_en" / "*.train.*.txt.xz"),
            "--dev", str(data / "lm_en" / "enwiki_core.valid.txt.xz"),
            "--output", str(output), "--init-weights", str(init), *shape, *RECIPE,
            "--training.max_cpu_minutes", f"{cpu_minutes:g}", "--resume"]


def spent_minutes(run: Path) -> float:
    train = [r for r in read_metrics(run / "metrics.jsonl") if r["type"] == "train"]
    return train[-1]["cpu_s"] / 60 if train else 0.0


def run_arms(arms: Dict[str, List[str]], runs: Path, cpu_minutes: float) -> None:
    """Start every unfinished arm at once (one thread each) and wait for all."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
           "OMP_WAIT_POLICY": "PASSIVE"}
    running = []
    for name, command in arms.items():
        run = runs / name
        if (run / "model" / "weights.hdf5").exists() and spent_minutes(run) >= cpu_minutes - 0.5:
            continue
        log = (runs / f"{name}.log").open("a", encoding="utf-8")
        running.append((name, subprocess.Popen(command, env=env, stdout=log, stderr=log), log))
    for name, process, log in running:
        if process.wait() != 0:
            raise SystemExit(f"arm {name} failed: see {runs / (name + '.log')}")
        log.close()


def start_ppl(start: Path, data: Path, cache: Path) -> float:
    """START's dev perplexity, read and batched as the runs' dev evaluation (CONFIG's
    settings) reads it."""
    if not cache.exists():
        config = PretrainConfig.from_file(CONFIG)
        job = PerplexityJob.prepare(str(start), [str(data / "lm_en" / "enwiki_core.valid.txt.xz")],
                                    lang=config.lang, skip_pattern=config.skip_pattern,
                                    max_tokens=config.dev_max_tokens, rows=config.batch_size,
                                    window=config.window, output=cache)
        job.write(job.measure())
    return float(json.loads(cache.read_text(encoding="utf-8"))["dev_ppl"])


def probes(weights: Path, data: Path, cache_dir: Path) -> Dict[str, str]:
    """WiC dev (layer chosen on train), WSD SemEval-2007 and XPOS dev (best layers)."""
    paths = probe_data(data, ("semcor", "wsd_dev", "ud"))
    cache_dir.mkdir(parents=True, exist_ok=True)
    wic = chosen(wic_probe(weights, data / "wic", cache_dir / "wic.json"))
    wsd = wsd_probe(weights, paths["semcor"], paths["wsd_dev"], cache_dir / "probe_wsd.json")
    pos = pos_probe(weights, paths["ud"], cache_dir / "probe_pos.json")
    xpos: Dict[str, Dict[str, float]] = pos["xpos"]["layers"]  # type: ignore[index,assignment]
    return {"wic": f"{wic['dev']:.1f} (layer {wic['layer']})",
            "wsd": best_layer(wsd["layers"]),  # type: ignore[arg-type]
            "pos": best_layer({k: v["dev"] for k, v in xpos.items()})}


def arm_row(name: str, run: Path) -> Dict[str, Any]:
    records = read_metrics(run / "metrics.jsonl")
    train = [r for r in records if r["type"] == "train"][-1]
    dev = [r for r in records if r["type"] == "dev"]
    bilm = load_bilm(run / "model")
    return {"name": name, "cells": bilm.options.lstm_dim,
            "params": sum(p.numel() for p in bilm.parameters()), "steps": train["step"],
            "tokens": train["tokens"], "cpu_min": train["cpu_s"] / 60,
            "tok_per_cpu_s": train["tokens"] / train["cpu_s"], "dev": dev,
            "final": dev[-1]["dev_ppl"]}


def plot(rows: List[Dict[str, Any]], start: float, png: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for row in rows:
        ax.plot([0] + [d["cpu_s"] / 60 for d in row["dev"]], [start] + [d["dev_ppl"] for d in
                row["dev"]], marker="o", label=f"{row['name']} ({row['cells']} cells)")
    ax.axhline(start, color="grey", linestyle=":", label="start")
    ax.set_xlabel("CPU minutes of training steps")
    ax.set_ylabel("dev perplexity (full softmax)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(png, dpi=120)


def shown(path: Path) -> str:
    """`path` relative to the repository when it lies in it."""
    resolved = path.resolve()
    return str(resolved.relative_to(ROOT)) if resolved.is_relative_to(ROOT) else str(path)


def report(rows: List[Dict[str, Any]], start: Path, start_row: Dict[str, Any], command: str,
           png: Path) -> str:
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        "# A wider biLM or the same one, at equal CPU time", "",
        f"Run {now} on {os.cpu_count()}-core {cpu_model()} ({cpu_isa()}), "
        "both arms at once, one thread each. Command:", "", "```bash", command, "```", "",
        f"Both continue `{shown(start)}` (dev perplexity {start_row['ppl']:.1f}).", "",
        "| arm | LSTM cells | parameters | steps | tokens | CPU minutes | tokens per CPU-s "
        "| dev ppl | WiC dev | WSD SemEval-2007 | XPOS dev |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        f"| start | {start_row['cells']} | {start_row['params']:,} | - | - | - | - | "
        f"{start_row['ppl']:.1f} | {start_row['wic']} | {start_row['wsd']} | "
        f"{start_row['pos']} |"]
    for row in rows:
        lines.append(
            f"| {row['name']} | {row['cells']} | {row['params']:,} | {row['steps']:,} | "
            f"{row['tokens']:,} | {row['cpu_min']:.1f} | {row['tok_per_cpu_s']:,.0f} | "
            f"**{row['final']:.1f}** | {row['wic']} | {row['wsd']} | {row['pos']} |")
    lines += ["", "Dev perplexity (mean of the directions) at each evaluation, with the CPU "
              "minutes spent by then: both arms read the same text in the same order, so a "
              "row compares them after the same text, and the CPU minutes say what it cost.",
              "", "| step | " + " | ".join(row["name"] for row in rows) + " |",
              "|---:|" + "---:|" * len(rows)]
    by_step = [{d["step"]: d for d in row["dev"]} for row in rows]
    for step in sorted(set().union(*by_step)):
        cells = [f"{d[step]['dev_ppl']:.1f} ({d[step]['cpu_s'] / 60:.0f} min)" if step in d
                 else "-" for d in by_step]
        lines.append(f"| {step:,} | " + " | ".join(cells) + " |")
    lines += ["", f"![dev perplexity against CPU minutes]({png.name})", ""]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("data", type=Path)
    parser.add_argument("--start", type=Path, default=ROOT / "benchmarks/results/en_long/export")
    parser.add_argument("--lstm-dim", type=int, default=1024)
    parser.add_argument("--cpu-minutes", type=float, default=60.0)
    parser.add_argument("--runs", type=Path, default=ROOT / "runs" / "widen")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks/results/widen_study.md")
    args = parser.parse_args()
    if not (args.start / "softmax.hdf5").exists():
        parser.error(f"--start {args.start} has no softmax.hdf5: give an export with its "
                     "softmax, e.g. the long English run's: git checkout 4e54c30 -- "
                     "benchmarks/results/en_long/export")
    runs, wide = args.runs, f"wide{args.lstm_dim}"
    runs.mkdir(parents=True, exist_ok=True)
    init = runs / f"{wide}_init"
    if not (init / "weights.hdf5").exists():
        subprocess.run([sys.executable, "-m", "spacy_elmo", "widen", str(init), "--lstm-dim",
                        str(args.lstm_dim), "--weights", str(args.start), "--seed", "0"],
                       check=True)
    arms = {"same": arm_command(args.data, runs / "same", args.start, args.cpu_minutes, None),
            wide: arm_command(args.data, runs / wide, init, args.cpu_minutes, args.lstm_dim)}
    run_arms(arms, runs, args.cpu_minutes)
    bilm = load_bilm(args.start)
    start_row: Dict[str, Any] = {
        "cells": bilm.options.lstm_dim, "params": sum(p.numel() for p in bilm.parameters()),
        "ppl": start_ppl(args.start, args.data, runs / "start_perplexity.json"),
        **probes(args.start, args.data, runs / "start_probes")}
    rows = []
    for name in arms:
        row = arm_row(name, runs / name)
        rows.append({**row, **probes(runs / name / "model", args.data, runs / name / "probes")})
    png = args.out.with_suffix(".png")
    plot(rows, start_row["ppl"], png)
    command = " ".join(["python benchmarks/widen_study.py", *sys.argv[1:]])
    text = report(rows, args.start, start_row, command, png)
    write_text(args.out, text + "\n")
    print(text)


if __name__ == "__main__":
    main()
