"""A pretraining run's progress as Markdown: what to commit while a long run goes on.

  python benchmarks/run_report.py RUN_DIR --out benchmarks/results/RUN.md [--command "..."]
      [--compare spacy_elmo/data/elmo_en_small/README.md] [--step-offset N]
      [--perplexity NAME=TEXT ...]

Reads RUN_DIR/config.json and metrics.jsonl (the files every `spacy-elmo pretrain` run
keeps) and writes the settings that matter, every dev evaluation (step, tokens, forward /
backward / mean full-softmax perplexity, training hours and CPU hours so far), the
throughput, the snapshots on disk, and how to continue the run. With --wic, each snapshot's
WiC dev accuracy (`spacy_elmo_lab.wic`, kept as `wic.json` in the snapshot so that it is
computed once; snapshots that already have one are listed without --wic); with --probes
DATA_DIR, each snapshot's nearest-neighbour WSD on SemEval-2007 and XPOS dev accuracy
(`spacy_elmo_lab.probe_wsd`, `spacy_elmo_lab.probe_pos`; kept as `probe_wsd.json` and
`probe_pos.json` in the snapshot, about 3 minutes a snapshot on 2 cores); with --perplexity
NAME=TEXT, each snapshot's perplexity on other held-out text, as the model card gives it
(`python -m spacy_elmo_lab.bundle --perplexity`: the run's dev_max_tokens tokens; kept as
`perplexity_NAME.json`), beside the compared card's figure. The run directory
itself (checkpoint, snapshots) is too large for git; this page is the record that survives it.
"""

from __future__ import annotations

import datetime
import hashlib
import json
from pathlib import Path
from typing import Dict, List, Optional

import typer
from spacy_elmo_lab.bundle import extra_perplexities
from spacy_elmo_lab.messages import user_errors
from spacy_elmo_lab.probe_pos import cached_probe as pos_probe
from spacy_elmo_lab.probe_wsd import cached_probe as wsd_probe
from spacy_elmo_lab.probes import best_layer, probe_data
from spacy_elmo_lab.wic import cached_probe, chosen

from spacy_elmo.bilm.hardware import cpu_model
from spacy_elmo.files.atomic import write_text
from spacy_elmo.files.json_io import write_json
from spacy_elmo.pretrain.config import PretrainConfig
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


def wic_cells(rows: List[Dict[str, object]]) -> List[str]:
    pick, best = chosen(rows), max(rows, key=lambda r: float(r["dev"]))  # type: ignore[arg-type]
    return [f"{pick['dev']:.1f} (layer {pick['layer']})",
            f"{best['dev']:.1f} (layer {best['layer']})"]


def probe_cells(weights: Optional[Path], wic: Optional[Path], probes: Optional[Dict[str, Path]],
                caches: Dict[str, Path], mfs: List[float]) -> Optional[List[str]]:
    """The WiC (two cells), WSD and POS cells of one biLM: each cached one read, each
    missing one probed when its data is given (and `weights` is not None); '-' for the rest.
    None when every cell would be '-'. SemCor's MFS on the WSD set goes into `mfs`."""
    cells = ["-", "-", "-", "-"]
    if caches["wic"].exists() or (wic is not None and weights is not None):
        # the weights are read only when the cache is missing
        cells[:2] = wic_cells(cached_probe(weights or caches["wic"], wic, caches["wic"]))
    if caches["wsd"].exists() or (probes is not None and weights is not None):
        semcor, dev = (None, None) if probes is None else (probes["semcor"], probes["wsd_dev"])
        result = wsd_probe(weights, semcor, dev, caches["wsd"])
        cells[2] = best_layer(result["layers"])  # type: ignore[arg-type]
        mfs.append(float(result["mfs"]))  # type: ignore[arg-type]
    if caches["pos"].exists() or (probes is not None and weights is not None):
        result = pos_probe(weights, None if probes is None else probes["ud"], caches["pos"])
        layers: Dict[str, Dict[str, float]] = result["xpos"]["layers"]  # type: ignore
        cells[3] = best_layer({k: v["dev"] for k, v in layers.items()})
    return None if cells == ["-"] * 4 else cells


def wic_table(run: Path, snapshots: List[Path], wic: Optional[Path],
              compare: Optional[Path], probes: Optional[Path] = None) -> List[str]:
    """One row per snapshot with a probe result: its dev perplexity (dev.json), WiC dev
    accuracy (of the layer chosen on train, and of the best layer on dev) and, with `probes`
    (a data directory: wsd/ and ud_en_ewt/), the best layer's nearest-neighbour WSD on
    SemEval-2007 and XPOS dev accuracy; each result kept beside the snapshot (wic.json,
    probe_wsd.json, probe_pos.json). With `compare` (a bundled biLM's card) that biLM's row
    first, its results kept in RUN_DIR/<probe>_<name>_<card hash>.json (probed when the card
    lies beside its weights)."""
    data = probe_data(probes, ("semcor", "wsd_dev", "ud")) if probes is not None else None
    lines: List[str] = []
    mfs: List[float] = []
    if compare is not None:
        name = card_name(compare)
        digest = hashlib.sha1(compare.read_bytes()).hexdigest()[:8]  # one card, one cache
        caches = {probe: run / f"{probe}_{name}_{digest}.json"
                  for probe in ("wic", "probe_wsd", "probe_pos")}
        beside = compare.parent if (compare.parent / "weights.hdf5").exists() else None
        cells = probe_cells(beside, wic, data, {"wic": caches["wic"], "wsd": caches["probe_wsd"],
                                                "pos": caches["probe_pos"]}, mfs)
        if cells is not None:
            curve = card_curve(compare)
            ppl = f"{curve[max(curve)]:.1f}" if curve else "-"
            lines.append(f"| {name} (compared) | - | {ppl} | " + " | ".join(cells) + " |")
    for snap in snapshots:
        caches = {"wic": snap / "wic.json", "wsd": snap / "probe_wsd.json",
                  "pos": snap / "probe_pos.json"}
        if not all(path.exists() for path in caches.values()) and (wic or data):
            typer.echo(f"probing {snap} ...")
        cells = probe_cells(snap, wic, data, caches, mfs)
        if cells is None:
            continue
        dev = json.loads((snap / "dev.json").read_text()) if (snap / "dev.json").exists() else {}
        tokens = f"{dev['tokens'] / 1e6:.1f}M" if "tokens" in dev else "-"
        ppl = f"{dev['dev_ppl']:.1f}" if "dev_ppl" in dev else "-"
        lines.append(f"| {snap.name} | {tokens} | {ppl} | " + " | ".join(cells) + " |")
    if not lines:
        return []
    baseline = f"{mfs[0]:.1f}" if mfs else "-"
    return ["## Probes of the snapshots", "",
            "WiC: `python -m spacy_elmo_lab.wic SNAPSHOT WIC_DIR` (cosine threshold fitted on "
            "WiC train; chance 50, published ELMo 57.7 on test). WSD: `python -m "
            "spacy_elmo_lab.probe_wsd SEMCOR SEMEVAL2007 --weights SNAPSHOT`, the best layer's "
            "nearest-neighbour accuracy on SemEval-2007, the dev set (SemCor's most frequent "
            f"sense: {baseline}). POS: `python -m spacy_elmo_lab.probe_pos UD_DIR --weights "
            "SNAPSHOT`, the best layer's XPOS dev accuracy (L2 weight and epoch chosen on "
            "dev; the test split is not read). Layer 0 is the token layer, `mix` the mean "
            "of the layers.", "",
            "| snapshot | tokens | dev perplexity | WiC dev (layer chosen on train) | "
            "best layer on dev | WSD SemEval-2007 | XPOS dev |",
            "|---|---:|---:|---:|---:|---:|---:|", *lines, ""]


def card_perplexity(card: Path, name: str) -> Optional[float]:
    """The per-character perplexity on text NAME that a model card states, else None."""
    prefix = f"| perplexity on {name} |"
    for line in card.read_text(encoding="utf-8").splitlines():
        if line.startswith(prefix) and " per character" in line:
            return float(line.split(" per character")[0].split(",")[-1].split()[-1])
    return None


def perplexity_table(run: Path, snapshots: List[Path], specs: List[str],
                     compare: Optional[Path]) -> List[str]:
    """One row per snapshot: its per-character perplexity on each NAME=TEXT (cached in the
    snapshot as perplexity_NAME.json, computed once), the compared card's figure first."""
    if not specs or not snapshots:
        return []
    config = PretrainConfig.from_record(run / "config.json")
    names = [spec.split("=", 1)[0] for spec in specs]
    rows: List[str] = []
    if compare is not None:
        stated = [card_perplexity(compare, name) for name in names]
        if any(v is not None for v in stated):
            rows.append(f"| {card_name(compare)} (compared) | "
                        + " | ".join("-" if v is None else f"{v:.1f}" for v in stated) + " |")
    for snap in snapshots:
        cells = []
        for spec, name in zip(specs, names, strict=True):
            cache = snap / f"perplexity_{name}.json"
            if not cache.exists():
                typer.echo(f"perplexity of {snap} on {name} ...")
                _, path, result = extra_perplexities(snap, config, [spec])[0]
                write_json(cache, {"text": path, **result})
            cells.append(f"{json.loads(cache.read_text())['ppl_per_char']:.1f}")
        rows.append(f"| {snap.name} | " + " | ".join(cells) + " |")
    return ["## Perplexity of the snapshots on other text", "",
            "Per character, on the run's dev_max_tokens tokens of each text (as "
            "`python -m spacy_elmo_lab.bundle --perplexity` measures it for the model card): "
            + "; ".join(f"{n}: `{s.split('=', 1)[1]}`" for n, s in zip(names, specs,
                                                                      strict=True)) + ".", "",
            "| snapshot | " + " | ".join(names) + " |",
            "|---|" + "---:|" * len(names), *rows, ""]


def report(run: Path, command: Optional[str], compare: Optional[Path] = None,
           wic: Optional[Path] = None, probes: Optional[Path] = None,
           step_offset: int = 0, perplexity: Optional[List[str]] = None) -> str:
    """The report; `step_offset`: the run continues another one's export made at that step
    (its steps are then also given as the whole run's, and `compare`'s curve is left out);
    `perplexity`: NAME=TEXT specs of other held-out text."""
    config = json.loads((run / "config.json").read_text(encoding="utf-8"))
    rows = read_metrics(run / "metrics.jsonl")
    train = [r for r in rows if r["type"] == "train"]
    dev = [r for r in rows if r["type"] == "dev"]
    last = train[-1] if train else {"step": 0, "tokens": 0, "elapsed_s": 0.0, "cpu_s": 0.0}
    keys = ("optimizer", "lr", "warmup_steps", "lr_schedule", "max_steps", "batch_size",
            "window", "n_negatives", "dropout", "shuffle_buffer", "threads", "precision",
            "seed", "vocab_size", "init_weights")
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
        curve = compare is not None and not step_offset
        other = card_curve(compare) if curve and compare is not None else {}
        extra = (f" {card_name(compare)} at that step |" if curve and compare is not None
                 else " step of the whole run |" if step_offset else "")
        lines += ["| step | tokens | dev ppl forward | backward | mean | hours | CPU-hours |"
                  + extra, "|---:|---:|---:|---:|---:|---:|---:|" + ("---:|" if extra else "")]
        for r in dev:
            cell = (f" {r['step'] + step_offset:,} |" if step_offset
                    else f" {other[r['step']]:.1f} |" if r["step"] in other else " - |")
            lines.append(f"| {r['step']:,} | {r['tokens']:,} | {r['dev_ppl_fwd']:.1f} | "
                         f"{r['dev_ppl_bwd']:.1f} | **{r['dev_ppl']:.1f}** | "
                         f"{r.get('elapsed_s', 0) / 3600:.2f} | {r.get('cpu_s', 0) / 3600:.2f} |"
                         + (cell if extra else ""))
        lines.append("")
        continued = card_curve(compare) if step_offset and compare is not None else {}
        if continued and compare is not None:
            end = max(continued)
            init = config.get("init_weights")
            own = init is not None and Path(init).resolve() == compare.parent.resolve()
            what = ("The weights it continues" if own or init is None
                    else f"It continues `{init}`; the biLM compared")
            lines += [f"{what}, `{card_name(compare)}`: dev perplexity "
                      f"{continued[end]:.1f} at its step {end:,} (its model card).", ""]
    snapshots = sorted((run / "snapshots").glob("step_*")) if (run / "snapshots").exists() else []
    if snapshots:
        lines += ["Snapshots on disk: " + ", ".join(p.name for p in snapshots), ""]
        lines += wic_table(run, snapshots, wic, compare, probes)
        lines += perplexity_table(run, snapshots, perplexity or [], compare)
    return "\n".join(lines)


def main(run: Path, out: Path = typer.Option(..., help="Markdown file to write"),
         command: Optional[str] = typer.Option(None, help="the command that runs it"),
         compare: Optional[Path] = typer.Option(
             None, help="a bundled biLM's model card: its dev perplexity at the same steps"),
         wic: Optional[Path] = typer.Option(
             None, help="WiC directory: probe the snapshots that have no wic.json yet"),
         probes: Optional[Path] = typer.Option(
             None, help="Data directory with wsd/ and ud_en_ewt/: probe-wsd (SemEval-2007) "
             "and probe-pos (XPOS dev) of the snapshots that have no result yet"),
         step_offset: int = typer.Option(
             0, help="the run continues another run's export made at this step"),
         perplexity: List[str] = typer.Option(
             [], help="NAME=TEXT: each snapshot's perplexity on this held-out text"),
         ) -> None:
    bad = [spec for spec in perplexity if "=" not in spec or not spec.split("=", 1)[0]
           or not Path(spec.split("=", 1)[1]).is_file()]
    if bad:
        raise typer.BadParameter(f"{bad[0]!r}: give NAME=TEXT, TEXT a file that exists",
                                 param_hint="--perplexity")
    out.parent.mkdir(parents=True, exist_ok=True)
    with user_errors():  # missing probe data: its message, not a traceback
        text = report(run, command, compare, wic, probes, step_offset, perplexity)
    write_text(out, text)
    typer.echo(out)


if __name__ == "__main__":
    typer.run(main)
