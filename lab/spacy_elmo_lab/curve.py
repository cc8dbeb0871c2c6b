"""Downstream score against biLM perplexity: one ELMo training per biLM checkpoint.

  python -m spacy_elmo_lab.curve CONFIG CORPUS OUTPUT BILM [BILM ...]
      [--baseline metrics/ner_cnn_s0.test.json] [--max-steps 3000] [--eval-frequency 500]
      [--wic WIC_DIR] [--every N]

Each BILM is an export with a dev.json beside it (the snapshots that `spacy-elmo pretrain
--snapshot-every N` writes), a directory of such snapshots (with --every N: those whose
step is a multiple of N), or DIR=PPL to give its dev perplexity. For each, CONFIG is trained
on CORPUS/{train,dev}.spacy into OUTPUT/<name>/ and evaluated on CORPUS/test.spacy; its
done.json, written last, records the command, so a rerun skips what is done and trains
again a run stopped halfway or made with other settings. Writes OUTPUT/curve.md and
OUTPUT/curve.png: test score against dev perplexity, the baseline's test score as a line;
with --wic, each biLM's WiC dev accuracy beside it (the layer chosen on WiC train, as
`spacy_elmo_lab.wic` reports it).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import List, Optional, Tuple

import typer
from spacy.cli.evaluate import evaluate

from spacy_elmo.files.atomic import atomic_write, write_text
from spacy_elmo.files.json_io import write_json
from spacy_elmo.files.names import SNAPSHOT_INFO, SNAPSHOT_PREFIX

from .results import score
from .wic import cached_probe, chosen

# written into a biLM's run directory once it is trained and evaluated, with the command
DONE = "done.json"


def _bilm(spec: str) -> Tuple[Path, float, Optional[int]]:
    """(directory, dev perplexity, pretraining step or None) of a BILM argument."""
    if "=" in spec:
        path, ppl = spec.rsplit("=", 1)
        return Path(path), float(ppl), None
    info = Path(spec) / SNAPSHOT_INFO
    if not info.exists():
        raise typer.BadParameter(f"{spec} has no dev.json: pass {spec}=PERPLEXITY")
    data = json.loads(info.read_text())
    return Path(spec), float(data["dev_ppl"]), int(data["step"])


def _expand(specs: List[str], every: int = 0) -> List[str]:
    """A directory of snapshots (step_*/ with dev.json) stands for all of them, or for those
    whose step is a multiple of `every`."""
    out: List[str] = []
    for spec in specs:
        path = Path(spec)
        pattern = f"{SNAPSHOT_PREFIX}*/{SNAPSHOT_INFO}"
        snapshots = sorted(path.glob(pattern)) if "=" not in spec else []
        if not snapshots:
            out.append(spec)
            continue
        steps = [(p.parent, int(json.loads(p.read_text())["step"])) for p in snapshots]
        out.extend(str(d) for d, step in steps if not every or step % every == 0)
    return out


def wic_dev(bilm_dir: Path, wic: Path, cache: Path) -> float:
    """WiC dev accuracy of the layer chosen on train (spacy_elmo_lab.wic), kept in
    `cache` so that a rerun does not embed WiC again."""
    return float(chosen(cached_probe(bilm_dir, wic, cache))["dev"])  # type: ignore[arg-type]


def main(config: Path, corpus: Path, output: Path, bilms: List[str],
         baseline: Optional[Path] = None, max_steps: int = 3000, eval_frequency: int = 500,
         gpu_id: int = -1, wic: Optional[Path] = typer.Option(
             None, help="WiC directory: add each biLM's WiC dev accuracy"),
         every: int = typer.Option(
             0, min=0, help="Of a snapshot directory, only the steps that are multiples of N")
         ) -> None:
    if baseline is not None and not baseline.exists():
        raise typer.BadParameter(f"--baseline {baseline} does not exist (it is the CNN row's "
                                 "metrics/<run>.test.json: run the table's cnn cell first)")
    # worst biLM first: the table reads as the curve does, as pretraining goes on
    specs = sorted((_bilm(spec) for spec in _expand(bilms, every)), key=lambda s: -s[1])
    if not specs:
        raise typer.BadParameter(f"no biLM to train: {bilms} hold no snapshot whose step is a "
                                 f"multiple of --every {every}")
    names = [f"step_{step}" if step is not None else path.name for path, _, step in specs]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise typer.BadParameter(f"several biLMs would share the run name(s) {twice} (the "
                                 "name is the directory's): give them directories of "
                                 "different names")
    output.mkdir(parents=True, exist_ok=True)
    points = []
    for (path, ppl, step), name in zip(specs, names, strict=True):
        run = output / name
        command = [sys.executable, "-m", "spacy", "train", str(config), "--output", str(run),
                   "--paths.train", str(corpus / "train.spacy"),
                   "--paths.dev", str(corpus / "dev.spacy"), "--paths.elmo_weights", str(path),
                   "--training.max_steps", str(max_steps),
                   "--training.eval_frequency", str(eval_frequency)]
        result, done = run / "test.json", run / DONE
        if not done.exists() or json.loads(done.read_text())["command"] != command[1:]:
            subprocess.run(command + ["--gpu-id", str(gpu_id)], check=True)
            evaluate(str(run / "model-best"), corpus / "test.spacy", output=result,
                     use_gpu=gpu_id, silent=True)
            # written last: a run stopped before this is trained again
            write_json(done, {"command": command[1:]})
        wic_acc = wic_dev(path, wic, run / "wic.json") if wic is not None else None
        points.append((name, step, ppl, score(json.loads(result.read_text())), wic_acc))
        typer.echo(f"{name}: dev perplexity {ppl:.1f}, test {points[-1][3]:.1f}")
    base = score(json.loads(baseline.read_text())) if baseline else None
    lines = [f"Config `{config}`, {corpus.name}, {max_steps} steps; test score of the "
             "model selected on dev; WiC: dev accuracy of the biLM layer chosen on WiC train.",
             "", "| biLM | pretraining step | dev perplexity | test score | WiC dev |",
             "|---|---|---|---|---|"]
    lines += [f"| {n} | {s if s is not None else '-'} | {p:.1f} | {f:.1f} | "
              f"{'-' if w is None else f'{w:.1f}'} |" for n, s, p, f, w in points]
    if base is not None:
        lines.append(f"| baseline ({baseline}) | - | - | {base:.1f} | - |")
    write_text(output / "curve.md", "\n".join(lines) + "\n")
    try:
        import matplotlib
    except ImportError:
        typer.echo("matplotlib is not installed: no curve.png")
        return
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    fig, ax = plt.subplots(figsize=(6, 4))
    ordered = sorted(points, key=lambda p: -p[2])
    ax.plot([p[2] for p in ordered], [p[3] for p in ordered], "o-", label="ELMo")
    for name, _, ppl, value, _ in ordered:
        ax.annotate(name, (ppl, value), textcoords="offset points", xytext=(4, 4), fontsize=8)
    if base is not None:
        ax.axhline(base, color="grey", linestyle="--", label="spaCy CNN baseline")
    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(matplotlib.ticker.ScalarFormatter())
    ax.xaxis.set_minor_formatter(matplotlib.ticker.ScalarFormatter())
    ax.margins(x=0.12)
    ax.invert_xaxis()
    ax.set_xlabel("biLM dev perplexity (log scale; better to the right)")
    ax.set_ylabel("test score")
    ax.set_title(f"{corpus.name}: downstream score vs biLM perplexity")
    ax.legend(loc="lower right")
    fig.tight_layout()
    with atomic_write(output / "curve.png", suffix=".png") as tmp:
        fig.savefig(tmp, dpi=120)
    typer.echo(f"Wrote {output / 'curve.md'} and {output / 'curve.png'}")


if __name__ == "__main__":
    typer.run(main)
