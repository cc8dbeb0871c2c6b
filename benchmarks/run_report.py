"""A pretraining run's progress as Markdown: what to commit while a long run goes on.

  python benchmarks/run_report.py RUN_DIR --out benchmarks/results/RUN.md [--command "..."]
      [--compare spacy_elmo/data/elmo_en_small/README.md]

Reads RUN_DIR/config.json and metrics.jsonl (the files every `spacy-elmo pretrain` run
keeps) and writes the settings that matter, every dev evaluation (step, tokens, forward /
backward / mean full-softmax perplexity, training hours and CPU hours so far), the
throughput, the snapshots on disk, and how to continue the run. With --wic, each snapshot's
WiC dev accuracy (`scripts/wic_probe.py`, kept as `wic.json` in the snapshot so that it is
computed once; snapshots that already have one are listed without --wic). The run directory
itself (checkpoint, snapshots) is too large for git; this page is the record that survives it.
"""

from __future__ import annotations

import datetime
import hashlib
import json
from pathlib import Path
from typing import Dict, List, Optional

import typer

from spacy_elmo.experiments.wic import cached_probe, chosen
from spacy_elmo.files import write_text
from spacy_elmo.pretrain.machine import cpu_model
from spacy_elmo.pretrain.rundir import read_metrics


def card_name(card: Path) -> str:
    """The model's name on a model card's first line (`# NAME: ...`), else its directory's."""
    first = card.read_text(encoding="utf-8").splitlines()[0]
    return first[2:].split(":")[0].strip() if first.startswith("# ") else card.parent.name


def card_curve(card: Path) -> Dict[int, float]:
    """step -> mean dev perplexity from a bundled biLM's model card (its curve table)."""
    curve = {}
    for line in card.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 5 and cells[0].replace(",", "").isdigit():
            curve[int(cells[0].replace(",", ""))] = float(cells[4])
    return curve


def wic_row(name: str, tokens: str, ppl: str, rows: List[Dict[str, object]]) -> str:
    pick, best = chosen(rows), max(rows, key=lambda r: float(r["dev"]))  # type: ignore[arg-type]
    return (f"| {name} | {tokens} | {ppl} | {pick['dev']:.1f} (layer {pick['layer']}) | "
            f"{best['dev']:.1f} (layer {best['layer']}) |")


def wic_table(run: Path, snapshots: List[Path], wic: Optional[Path],
              compare: Optional[Path]) -> List[str]:
    """One row per snapshot with a WiC result: its dev perplexity (dev.json) and the probe's
    dev accuracy, of the layer chosen on train and of the best layer on dev; with `compare`
    (a bundled biLM's card) that biLM's row first, kept in RUN_DIR/wic_<name>_<card hash>.json
    (probed when the card lies beside its weights)."""
    lines = []
    if compare is not None:
        name = card_name(compare)
        digest = hashlib.sha1(compare.read_bytes()).hexdigest()[:8]  # one card, one cache
        cache = run / f"wic_{name}_{digest}.json"
        beside = (compare.parent / "weights.hdf5").exists()
        if (wic is not None and beside) or cache.exists():
            rows = cached_probe(compare.parent, wic, cache)
            curve = card_curve(compare)
            ppl = f"{curve[max(curve)]:.1f}" if curve else "-"
            lines.append(wic_row(f"{name} (compared)", "-", ppl, rows))
    for snap in snapshots:
        cache = snap / "wic.json"
        if not cache.exists() and wic is None:
            continue
        if not cache.exists():
            typer.echo(f"WiC probe of {snap} ...")
        rows = cached_probe(snap, wic, cache)
        dev = json.loads((snap / "dev.json").read_text()) if (snap / "dev.json").exists() else {}
        tokens = f"{dev['tokens'] / 1e6:.1f}M" if "tokens" in dev else "-"
        ppl = f"{dev['dev_ppl']:.1f}" if "dev_ppl" in dev else "-"
        lines.append(wic_row(snap.name, tokens, ppl, rows))
    if not lines:
        return []
    return ["## WiC of the snapshots", "",
            "`python scripts/wic_probe.py SNAPSHOT WIC_DIR` (cosine threshold fitted on WiC "
            "train; chance 50, published ELMo 57.7 on test):", "",
            "| snapshot | tokens | dev perplexity | WiC dev (layer chosen on train) | "
            "best layer on dev |", "|---|---:|---:|---:|---:|", *lines, ""]


def report(run: Path, command: Optional[str], compare: Optional[Path] = None,
           wic: Optional[Path] = None) -> str:
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
        extra = f" {card_name(compare)} at that step |" if compare is not None else ""
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
        lines += wic_table(run, snapshots, wic, compare)
    return "\n".join(lines)


def main(run: Path, out: Path = typer.Option(..., help="Markdown file to write"),
         command: Optional[str] = typer.Option(None, help="the command that runs it"),
         compare: Optional[Path] = typer.Option(
             None, help="a bundled biLM's model card: its dev perplexity at the same steps"),
         wic: Optional[Path] = typer.Option(
             None, help="WiC directory: probe the snapshots that have no wic.json yet"),
         ) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    write_text(out, report(run, command, compare, wic))
    typer.echo(out)


if __name__ == "__main__":
    typer.run(main)
