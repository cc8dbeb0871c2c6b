"""A pretraining run's progress as Markdown: what to commit while a long run goes on.

  python benchmarks/run_report.py RUN_DIR --out benchmarks/results/RUN.md [--command "..."]
      [--compare spacy_elmo/data/elmo_en_small/README.md]

Reads RUN_DIR/config.json and metrics.jsonl (the files every `spacy-elmo pretrain` run
keeps) and writes the settings that matter, every dev evaluation (step, tokens, forward /
backward / mean full-softmax perplexity, training hours and CPU hours so far), the
throughput, the snapshots on disk, and how to continue the run. The run directory itself
(checkpoint, snapshots) is too large for git; this page is the record that survives it.
"""

from __future__ import annotations

import datetime
import json
import sys
from pathlib import Path
from typing import Dict, Optional

import typer

from spacy_elmo.pretrain.plot import read_metrics

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_embed import cpu_model  # noqa: E402


def card_curve(card: Path) -> Dict[int, float]:
    """step -> mean dev perplexity from a bundled biLM's model card (its curve table)."""
    curve = {}
    for line in card.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 5 and cells[0].replace(",", "").isdigit():
            curve[int(cells[0].replace(",", ""))] = float(cells[4])
    return curve


def report(run: Path, command: Optional[str], compare: Optional[Path] = None) -> str:
    config = json.loads((run / "config.json").read_text(encoding="utf-8"))
    rows = read_metrics(run / "metrics.jsonl")
    train = [r for r in rows if r["type"] == "train"]
    dev = [r for r in rows if r["type"] == "dev"]
    last = train[-1] if train else {"step": 0, "tokens": 0, "elapsed_s": 0.0, "cpu_s": 0.0}
    keys = ("optimizer", "lr", "warmup_steps", "lr_schedule", "max_steps", "batch_size",
            "window", "n_negatives", "dropout", "shuffle_buffer", "threads", "vocab_size")
    lines = [f"# Pretraining run `{run}`", "",
             f"Report of {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC "
             f"(`python benchmarks/run_report.py {run}`), on {cpu_model()}.", ""]
    if command:
        lines += ["Command:", "", "```bash", command, "```", ""]
    lines += ["Continue it (from its last checkpoint, bit for bit): "
              f"`spacy-elmo pretrain --output {run} --resume`.", "",
              "## Settings", "",
              f"- train: {', '.join(config['train'])}; dev: {', '.join(config.get('dev') or [])}",
              f"- model: preset {config.get('preset')}, options "
              f"`{json.dumps(config.get('options', {}))}`",
              "- " + ", ".join(f"{k} {config.get(k)}" for k in keys), "",
              "## Progress", "",
              f"- step {last['step']:,} of {config.get('max_steps'):,}: "
              f"{last['tokens']:,} tokens in {last['elapsed_s'] / 3600:.2f} h of training "
              f"steps ({last['cpu_s'] / 3600:.2f} CPU-hours), "
              f"{last['tokens'] / max(last['elapsed_s'], 1e-9):,.0f} tokens/s on average", ""]
    if dev:
        other = card_curve(compare) if compare is not None else {}
        extra = f" {compare.parent.name} at that step |" if compare is not None else ""
        lines += ["| step | tokens | dev ppl forward | backward | mean | hours | CPU-hours |"
                  + extra, "|---:|---:|---:|---:|---:|---:|---:|" + ("---:|" if extra else "")]
        for r in dev:
            cell = f" {other[r['step']]:.1f} |" if r["step"] in other else " - |"
            lines.append(f"| {r['step']:,} | {r['tokens']:,} | {r['dev_ppl_fwd']:.1f} | "
                         f"{r['dev_ppl_bwd']:.1f} | **{r['dev_ppl']:.1f}** | "
                         f"{r.get('elapsed_s', 0) / 3600:.2f} | {r.get('cpu_s', 0) / 3600:.2f} |"
                         + (cell if extra else ""))
        lines.append("")
    snapshots = sorted((run / "snapshots").glob("step_*")) if (run / "snapshots").exists() else []
    if snapshots:
        lines += ["Snapshots on disk: " + ", ".join(p.name for p in snapshots), ""]
    return "\n".join(lines)


def main(run: Path, out: Path = typer.Option(..., help="Markdown file to write"),
         command: Optional[str] = typer.Option(None, help="the command that runs it"),
         compare: Optional[Path] = typer.Option(
             None, help="a bundled biLM's model card: its dev perplexity at the same steps"),
         ) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(report(run, command, compare), encoding="utf-8")
    typer.echo(out)


if __name__ == "__main__":
    typer.run(main)
