"""Export a pretraining run as the package's bundled biLM, with its model card.

  python scripts/bundle_bilm.py RUN_DIR [--snapshot RUN_DIR/snapshots/step_N]
      [--output spacy_elmo/data/elmo_en_small]

Writes options.json + weights.hdf5 (published layout; no softmax, no vocabulary: the
component does not need them) and README.md, a model card made from the run's config.json
and metrics.jsonl: data, size, steps, tokens, training time, hardware, dev perplexity. The
model is the run's checkpoint, or the snapshot given (whose dev.json holds the dev
perplexity of exactly that step).
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Optional

import typer

from spacy_elmo.bilm import load_bilm, save_bilm
from spacy_elmo.pretrain.checkpoint import load_checkpoint, model_from_checkpoint

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from bench_embed import cpu_model  # noqa: E402

DEFAULT_OUTPUT = Path(__file__).resolve().parents[1] / "spacy_elmo" / "data" / "elmo_en_small"


def main(run: Path, snapshot: Optional[Path] = None, output: Path = DEFAULT_OUTPUT) -> None:
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()
            if line.strip()]
    output.mkdir(parents=True, exist_ok=True)
    if snapshot is not None:
        for name in ("options.json", "weights.hdf5"):
            shutil.copyfile(snapshot / name, output / name)
        last_dev = json.loads((snapshot / "dev.json").read_text())
        trained = [r for r in rows if r.get("type") == "train" and r["step"] <= last_dev["step"]]
        last = {"step": last_dev["step"], "tokens": last_dev["tokens"],
                "elapsed": trained[-1]["elapsed_s"] if trained else float("nan")}
    else:
        checkpoint = load_checkpoint(run)
        save_bilm(model_from_checkpoint(checkpoint).bilm, output)
        last = {k: checkpoint[k] for k in ("step", "tokens", "elapsed")}
    dev = [r for r in rows if r.get("type") == "dev" and r["step"] <= last["step"]]
    if snapshot is None:
        last_dev = dev[-1] if dev else {}
    bilm = load_bilm(output)
    config = json.loads((run / "config.json").read_text())
    n_params = sum(p.numel() for p in bilm.parameters())
    o = bilm.options
    curve = "\n".join(f"| {r['step']} | {r['tokens'] / 1e6:.2f}M | {r['dev_ppl_fwd']:.1f} | "
                      f"{r['dev_ppl_bwd']:.1f} | {r['dev_ppl']:.1f} |" for r in dev)
    nan = float("nan")
    table = [
        ("architecture",
         f"char CNN {[list(f) for f in o.filters]} ({o.n_filters} filters), "
         f"{o.n_highway} highway, projection {o.projection_dim}; {o.n_layers} x LSTM "
         f"{o.lstm_dim} with projection {o.projection_dim}, clip {o.cell_clip}/{o.proj_clip}, "
         "residual"),
        ("output", f"{o.n_output_layers} layers x {o.output_dim} (token layer + "
                   f"{o.n_layers} LSTM layers)"),
        ("parameters", f"{n_params / 1e6:.2f}M (weights.hdf5, float32); the softmax "
                       f"({config.get('vocab_size')} words) is not shipped"),
        ("training data", "English Wikipedia text (`lm_en`, enwiki_core train shards: articles "
                          "of a 2015 dump, extracted with WikiExtractor), tokenized with "
                          "spaCy's English tokenizer"),
        ("training", f"{last['step']} steps of {config.get('batch_size')} rows x "
                     f"{config.get('window')} tokens, {last['tokens'] / 1e6:.1f}M tokens; "
                     f"{config.get('optimizer')} lr {config.get('lr')}, sampled softmax with "
                     f"{config.get('n_negatives')} negatives, dropout {config.get('dropout')}"),
        ("time and hardware", f"{last['elapsed'] / 3600:.2f} h on {config.get('threads')} "
                              f"thread(s) of a shared 2-core {cpu_model()} (CPU only)"),
        ("dev perplexity",
         f"{last_dev.get('dev_ppl', nan):.1f} at step {last_dev.get('step', '?')} (mean of forward "
         f"{last_dev.get('dev_ppl_fwd', nan):.1f} and backward "
         f"{last_dev.get('dev_ppl_bwd', nan):.1f}; full softmax over the "
         f"{config.get('vocab_size')}-word vocabulary, other words as `<UNK>`, on "
         f"{last_dev.get('dev_tokens', 0)} tokens of enwiki_core.valid)"),
    ]
    rows_md = "\n".join(f"| {k} | {v} |" for k, v in table)
    card = f"""# elmo_en_small: the bundled English biLM

The biLM that `nlp.add_pipe("elmo")` uses when no weights are given. Pretrained by this
project's own pipeline (`spacy-elmo pretrain`, then `scripts/bundle_bilm.py`).

| | |
|---|---|
{rows_md}

This is a small model trained briefly on one CPU: far weaker than the published models (the
original reaches perplexity 39.7 on the 1B Word Benchmark after two weeks on three GPUs).
Continue its run with `spacy-elmo pretrain --output runs/lm_en_small --resume`, or
pretrain a larger one, and point `weights` at it.

Dev perplexity during training:

| step | tokens | forward | backward | mean |
|---|---|---|---|---|
{curve}

License: trained on Wikipedia text (CC BY-SA 3.0, Wikipedia contributors); these weights are
shared under the same license, CC BY-SA 3.0 (https://creativecommons.org/licenses/by-sa/3.0/).
"""
    (output / "README.md").write_text(card, encoding="utf-8")
    size = (output / "weights.hdf5").stat().st_size / 2**20
    typer.echo(f"bundled {run} -> {output} ({size:.1f} MB), dev perplexity "
               f"{last_dev.get('dev_ppl', float('nan')):.1f}")


if __name__ == "__main__":
    typer.run(main)
