"""Do bf16 and fp32 pretraining learn the same? Two runs of `spacy-elmo pretrain` from the
same random start on the same batches (same seed, same vocabulary), one at each precision,
and their training losses side by side, as the relative difference of each logged loss
(every 20 steps, a mean over those steps) and of the mean over the last 100 steps.

    python benchmarks/bf16_loss_curves.py ../shared/data/lm_en/enwiki_core.train.00.txt.xz \
        --steps 500 --out benchmarks/results/bf16_loss_curves.md

The shape and recipe are the bundled biLM's (configs/pretrain_en.cfg), its vocabulary the long
English run's export (no counting). bf16 must be native (E230 otherwise). Runs in a temporary
directory; prints the CPU and its flags.
"""

from __future__ import annotations

import argparse
import datetime
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Dict, List

from spacy_elmo.bilm.hardware import cpu_flags, cpu_isa, cpu_model

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "configs" / "pretrain_en.cfg"
VOCAB = ROOT / "benchmarks" / "results" / "en_long" / "export" / "vocab.txt"


def matrix_flags() -> List[str]:
    """The CPU flags that decide the matmul path."""
    return sorted(f for f in cpu_flags() if f.startswith(("avx2", "avx512f", "avx512_bf16", "amx")))


def train(text: str, output: Path, precision: str, steps: int, seed: int) -> Dict[int, dict]:
    """Run the CLI; the `train` records of its metrics.jsonl by step."""
    command = [sys.executable, "-m", "spacy_elmo", "pretrain", str(CONFIG), text,
               "--output", str(output), "--paths.dev", "[]", "--vocab", str(VOCAB),
               "--max-steps", str(steps), "--training.seed", str(seed),
               "--training.snapshot_every", "null", "--training.eval_every", str(steps + 1),
               "--optimizer.warmup_steps", "100", "--system.precision", precision]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    records = [json.loads(line) for line in (output / "metrics.jsonl").read_text().splitlines()]
    return {r["step"]: r for r in records if r.get("type") == "train"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("text", help="training text (a file or glob)")
    parser.add_argument("--steps", type=int, default=500)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=None, help="also write the markdown here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        runs = {p: train(args.text, Path(tmp) / p, p, args.steps, args.seed)
                for p in ("fp32", "bf16")}
    steps = sorted(set(runs["fp32"]) & set(runs["bf16"]))
    lines: List[str] = [
        "# bf16 against fp32 pretraining: the loss curves",
        "",
        f"Command: `python benchmarks/bf16_loss_curves.py {args.text} --steps {args.steps}`",
        "",
        f"{datetime.date.today()}; CPU: {cpu_model()} (flags: {', '.join(matrix_flags())}; "
        f"{cpu_isa()}). Bundled shape and recipe (configs/pretrain_en.cfg, warmup 100), the "
        "long English run's vocabulary (50,000 words of lm_en), "
        f"seed {args.seed}, from random weights; each row is the mean "
        "training loss (sampled softmax, per token) of the 20 steps it ends.",
        "",
        "| step | fp32 loss | bf16 loss | bf16 - fp32 | relative |",
        "|---:|---:|---:|---:|---:|",
    ]
    worst = 0.0
    for step in steps:
        a, b = runs["fp32"][step]["loss"], runs["bf16"][step]["loss"]
        worst = max(worst, abs(b - a) / a)
        if step % 100 == 0 or step == steps[-1] or step <= 40:
            lines.append(f"| {step:,} | {a:.4f} | {b:.4f} | {b - a:+.4f} | {(b - a) / a:+.2%} |")
    tail = [s for s in steps if s > steps[-1] - 100]
    mean = {p: sum(runs[p][s]["loss"] for s in tail) / len(tail) for p in runs}
    speed = {p: sum(runs[p][s]["tokens_per_s"] for s in tail) / len(tail) for p in runs}
    lines += [
        "",
        f"- largest relative difference of a logged loss: {worst:.2%}",
        f"- mean loss over the last 100 steps: fp32 {mean['fp32']:.4f}, bf16 {mean['bf16']:.4f}"
        f" ({(mean['bf16'] - mean['fp32']) / mean['fp32']:+.2%})",
        f"- training tokens/s over the last 100 steps (as logged; the machine may be shared): "
        f"fp32 {speed['fp32']:,.0f}, bf16 {speed['bf16']:,.0f} "
        f"({speed['bf16'] / speed['fp32']:.2f}x)",
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        args.out.write_text(text)


if __name__ == "__main__":
    main()
