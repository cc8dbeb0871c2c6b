"""Export a pretraining run as the package's bundled biLM for a language, with its model card.

  python -m spacy_elmo_lab.bundle RUN_DIR --lang en|zh [--snapshot RUN_DIR/snapshots/step_N]
      [--output spacy_elmo/data/elmo_<lang>_small] [--wic WIC_DIR]
      [--perplexity NAME=TEXT ...] [--history TEXT] [--data TEXT]
      [--earlier-steps N --earlier-tokens N]

Writes options.json + weights.hdf5 (published layout; no softmax, no vocabulary: the
component does not need them) and README.md, a model card made from the run's config.json
and metrics.jsonl: data, size, steps, tokens, training time, hardware, the dev perplexity
curve; with --wic the WiC probe's accuracies (`spacy_elmo_lab.wic`), with --perplexity the
per-token and per-character perplexity on other held-out texts (e.g. news). The model is
the run's checkpoint, or the snapshot given (whose dev.json holds the dev perplexity of
exactly that step). A run that continued other weights (`--init-weights`) records only its
own steps: --history says what the weights had been through before (a card row), and
--earlier-steps / --earlier-tokens how many steps and tokens that was, for a `training in
all` row (what `spacy_elmo_lab.bundled_history` plots the biLM at). A
language gets its bundled default in `spacy_elmo/bilm/io/sources.py` (`BUNDLED`) once its
model is in `spacy_elmo/data/`.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import Annotated, Any, Dict, List, Optional, Tuple

import torch
import typer

from spacy_elmo.bilm import load_bilm
from spacy_elmo.bilm.hardware import describe_device
from spacy_elmo.bilm.io.sources import DATA_DIR
from spacy_elmo.files.atomic import atomic_directory, write_text
from spacy_elmo.files.names import (
    CHECKPOINT_NAME,
    CONFIG_NAME,
    METRICS_NAME,
    OPTIONS_NAME,
    SNAPSHOT_INFO,
    WEIGHTS_NAME,
)
from spacy_elmo.pretrain.checkpoint import load_checkpoint, model_from_checkpoint
from spacy_elmo.pretrain.config import PretrainConfig
from spacy_elmo.pretrain.corpus import resolve_files
from spacy_elmo.pretrain.export import export_model
from spacy_elmo.pretrain.perplexity import load_lm, text_perplexity
from spacy_elmo.pretrain.rundir import read_metrics

from .wic import chosen, probe

# per language: the card's name for the model, its training data, and the weights' license
LANGUAGES: Dict[str, Dict[str, str]] = {
    "en": {
        "title": "the bundled English biLM",
        "data": "English Wikipedia text (`lm_en`: articles of a 2015 dump and of early 2018, "
                "extracted with WikiExtractor), tokenized with spaCy's English tokenizer",
        "caveat": "A small model trained on one CPU: far weaker than the published English "
                  "models (the original reaches perplexity 39.7 on the 1B Word Benchmark "
                  "after two weeks on three GPUs).",
        "license": "trained on Wikipedia text (CC BY-SA 3.0, Wikipedia contributors); these "
                   "weights are shared under the same license, CC BY-SA 3.0 "
                   "(https://creativecommons.org/licenses/by-sa/3.0/)",
    },
    "zh": {
        "title": "the bundled Chinese biLM",
        "data": "a slice of Chinese Wikipedia (`zhwiki_partial`: 96,487 articles, converted to "
                "Simplified characters, every 100th line held out), characters as tokens "
                "(spaCy's `zh` tokenizer, its default `char` segmenter)",
        "caveat": "A small model trained on one CPU. Its perplexity is per character (each "
                  "character is a token), so it does not compare with word-level "
                  "perplexities such as the English models'. It reads single characters (at "
                  "most 6 UTF-8 bytes a token): with a word segmenter (jieba, pkuseg) "
                  "longer tokens are cut, with a warning; pretrain a word biLM for those.",
        "license": "trained on Chinese Wikipedia text (CC BY-SA 4.0, Wikipedia contributors, "
                   "https://zh.wikipedia.org); these weights are shared under the same "
                   "license, CC BY-SA 4.0 (https://creativecommons.org/licenses/by-sa/4.0/)",
    },
}


def rows_upto(rows: List[Dict[str, Any]], kind: str, step: int) -> List[Dict[str, Any]]:
    """The metrics.jsonl rows of this type (train, dev) logged at or before `step`."""
    return [r for r in rows if r.get("type") == kind and r["step"] <= step]


def take_model(run: Path, snapshot: Optional[Path], rows: List[Dict[str, Any]],
               scratch: Path) -> Tuple[Path, Dict[str, Any], Dict[str, Any]]:
    """The export to bundle (the snapshot, or the run's checkpoint exported into `scratch`,
    softmax and vocabulary included), its (step, tokens, elapsed), and its dev record (a
    snapshot's dev.json; for the checkpoint, its last dev row in metrics.jsonl)."""
    if snapshot is not None:
        last_dev = json.loads((snapshot / SNAPSHOT_INFO).read_text())
        trained = rows_upto(rows, "train", last_dev["step"])
        last = {"step": last_dev["step"], "tokens": last_dev["tokens"],
                "elapsed": trained[-1]["elapsed_s"] if trained else float("nan")}
        return snapshot, last, last_dev
    checkpoint = load_checkpoint(run / CHECKPOINT_NAME)
    export_model(model_from_checkpoint(checkpoint), checkpoint["vocab"], scratch)
    dev = rows_upto(rows, "dev", checkpoint["step"])
    return (scratch, {k: checkpoint[k] for k in ("step", "tokens", "elapsed")},
            dev[-1] if dev else {})


def extra_perplexities(lm_dir: Path, config: PretrainConfig, texts: List[str]
                       ) -> List[Tuple[str, str, Dict[str, float]]]:
    """Perplexity (per token and per character) of the language model on each NAME=TEXT,
    as (NAME, TEXT, result), on at most the run's `dev_max_tokens` tokens of each."""
    if not texts:
        return []
    lm, vocab = load_lm(lm_dir)
    out = []
    for spec in texts:
        name, path = spec.split("=", 1)
        out.append((name, path, text_perplexity(lm, vocab, resolve_files([path]),
                                                config.text_settings(),
                                                rows=config.batch_size, window=config.window,
                                                max_tokens=config.dev_max_tokens)))
    return out


def main(run: Path, lang: str = typer.Option(..., help="en or zh"),
         snapshot: Optional[Path] = None, output: Optional[Path] = None,
         wic: Optional[Path] = typer.Option(None, help="WiC directory: add the probe"),
         perplexity: List[str] = typer.Option([], help="NAME=TEXT: perplexity on this text"),
         history: Annotated[Optional[str], typer.Option(
             help="what the run's --init-weights had been trained on before (a continued "
                  "run): a row of the card")] = None,
         data: Annotated[Optional[str], typer.Option(
             help="the card's training data row, where the run read other text than the "
                  "language's usual one")] = None,
         earlier_steps: Annotated[Optional[int], typer.Option(
             help="the steps --init-weights had been trained for before this run (with "
                  "--earlier-tokens): a 'training in all' row")] = None,
         earlier_tokens: Annotated[Optional[int], typer.Option(
             help="the tokens (characters for zh) those steps read")] = None,
         ) -> None:
    if lang not in LANGUAGES:
        raise typer.BadParameter(f"--lang must be one of {sorted(LANGUAGES)}")
    earlier = earlier_training(earlier_steps, earlier_tokens)
    output = output or DATA_DIR / f"elmo_{lang}_small"
    output.parent.mkdir(parents=True, exist_ok=True)
    # everything is made in a directory beside `output`, which replaces it only at the end:
    # a failure (a snapshot without dev.json, a bad WiC directory) keeps the old one
    with atomic_directory(output) as staging, tempfile.TemporaryDirectory() as scratch:
        make_bundle(run, lang, snapshot, staging, output.name, wic, perplexity, Path(scratch),
                    history, data, earlier)
    size = (output / WEIGHTS_NAME).stat().st_size / 2**20
    typer.echo(f"bundled {run} -> {output} ({size:.1f} MB)")


def earlier_training(steps: Optional[int], tokens: Optional[int]
                     ) -> Optional[Tuple[int, int]]:
    """(steps, tokens) of --earlier-steps and --earlier-tokens: both or neither, not
    negative."""
    if steps is None and tokens is None:
        return None
    if steps is None or tokens is None:
        raise typer.BadParameter("give --earlier-steps and --earlier-tokens together (the "
                                 "steps and tokens the --init-weights had been trained for)")
    if steps < 0 or tokens < 0:
        raise typer.BadParameter(f"--earlier-steps {steps} / --earlier-tokens {tokens}: "
                                 "counts of steps and tokens are not negative")
    return steps, tokens


def hardware(rows: List[Dict[str, Any]], step: int, threads: Optional[int]) -> str:
    """Where the run trained up to `step`, from the records each (re)start wrote."""
    starts = [r for r in rows if r.get("type") == "start" and r["step"] < step]
    if not starts:
        return (f"{threads} thread(s) a process; the run did not record its hardware (it was "
                f"bundled on a {describe_device(torch.device('cpu'))})")
    setups = ((f"{r['world_size']} processes on " if r["world_size"] > 1 else "")
              + f"{r['hardware']}, {r['threads']} thread(s), {r['precision']}" for r in starts)
    return "; ".join(dict.fromkeys(setups))  # each setup once, in the order the run met them


def make_bundle(run: Path, lang: str, snapshot: Optional[Path], output: Path, name: str,
                wic: Optional[Path], perplexity: List[str], scratch: Path,
                history: Optional[str] = None, data: Optional[str] = None,
                earlier: Optional[Tuple[int, int]] = None) -> None:
    """Write the biLM and its model card (titled `name`) into `output` (`scratch`: an
    empty directory for the checkpoint's export; `history`: the earlier training of a run
    that continued other weights, a row before this run's own; `data`: the training data
    row, if not the language's usual text; `earlier`: the steps and tokens of that earlier
    training, for a row of the whole)."""
    about = LANGUAGES[lang]
    rows = read_metrics(run / METRICS_NAME)
    lm_dir, last, last_dev = take_model(run, snapshot, rows, scratch)
    for file_name in (OPTIONS_NAME, WEIGHTS_NAME):
        shutil.copyfile(lm_dir / file_name, output / file_name)
    dev = rows_upto(rows, "dev", last["step"])
    bilm = load_bilm(output)
    config = PretrainConfig.from_record(run / CONFIG_NAME)
    n_params = sum(p.numel() for p in bilm.parameters())
    o = bilm.options
    nan = float("nan")
    unit = "characters" if lang == "zh" else "tokens"
    dev_files = ", ".join(Path(d).name for d in config.dev or [])  # not this machine's paths
    table = [
        ("architecture",
         f"char CNN {[list(f) for f in o.filters]} ({o.n_filters} filters) over at most "
         f"{o.max_characters_per_token - 2} UTF-8 bytes a token, {o.n_highway} highway, "
         f"projection {o.projection_dim}; {o.n_layers} x LSTM {o.lstm_dim} with projection "
         f"{o.projection_dim}, clip {o.cell_clip}/{o.proj_clip}, residual"),
        ("output", f"{o.n_output_layers} layers x {o.output_dim} (token layer + "
                   f"{o.n_layers} LSTM layers)"),
        ("parameters", f"{n_params / 1e6:.2f}M (weights.hdf5, float32); the softmax "
                       f"({config.vocab_size:,} {unit}) is not shipped"),
        ("training data", data or about["data"]),
        *([("earlier training", history)] if history else []),
        ("training", f"{last['step']:,} steps of {config.batch_size} rows x {config.window} "
                     f"{unit}, {last['tokens'] / 1e6:.1f}M {unit}"
                     + (f" (a snapshot: the run's schedule has {config.max_steps:,} steps)"
                        if last["step"] < config.max_steps else "")
                     + f"; {config.optimizer} lr {config.lr} (warmup {config.warmup_steps}, "
                     f"{config.lr_schedule}), sampled softmax with {config.n_negatives:,} "
                     f"negatives, dropout {config.dropout}"
                     + (f", carried LSTM state reset with probability {config.state_reset}"
                        if config.state_reset else "")),
        *([("training in all",
            f"{earlier[0] + last['step']:,} steps, "
            f"{(earlier[1] + last['tokens']) / 1e6:.1f}M {unit} (the earlier training and "
            "this run's)")] if earlier else []),
        ("time and hardware", f"{last['elapsed'] / 3600:.2f} h of training steps; "
                              + hardware(rows, last["step"], config.threads)),
        ("dev perplexity",
         f"{last_dev.get('dev_ppl', nan):.1f} at step {last_dev.get('step', '?')} (mean of "
         f"forward {last_dev.get('dev_ppl_fwd', nan):.1f} and backward "
         f"{last_dev.get('dev_ppl_bwd', nan):.1f}; full softmax, other {unit} as `<UNK>`, on "
         f"{last_dev.get('dev_tokens', 0):,} {unit} of {dev_files})"),
    ]
    for text_name, path, result in extra_perplexities(lm_dir, config, perplexity):
        table.append((f"perplexity on {text_name}",
                      f"{result['dev_ppl']:.1f} per token, "
                      f"{result['ppl_per_char']:.1f} per character "
                      f"({result['dev_tokens']:,} tokens of {Path(path).name})"))
    if wic is not None:
        wic_rows = probe(bilm, wic)
        pick = chosen(wic_rows)
        per_layer = ", ".join(f"{r['layer']} {r['dev']:.1f}" for r in wic_rows)
        table.append(("WiC (word in context)",
                      f"dev accuracy {pick['dev']:.1f} with the layer chosen on train "
                      f"({pick['layer']}); per layer: {per_layer} (chance 50, published "
                      "ELMo 57.7 on test)"))
    rows_md = "\n".join(f"| {k} | {v} |" for k, v in table)
    curve = "\n".join(f"| {r['step']:,} | {r['tokens'] / 1e6:.2f}M | {r['dev_ppl_fwd']:.1f} | "
                      f"{r['dev_ppl_bwd']:.1f} | {r['dev_ppl']:.1f} |" for r in dev)
    card = f"""# {name}: {about['title']}

The biLM that `nlp.add_pipe("elmo")` uses when no weights are given to a `{lang}` pipeline.
Pretrained by this project's own pipeline (`spacy-elmo pretrain`, then
`spacy_elmo_lab.bundle`), with the settings below.

| | |
|---|---|
{rows_md}

{about['caveat']}
Continue its run with `spacy-elmo pretrain --output RUN --resume` (or from this export
with `--init-weights`), or pretrain a larger one, and point `weights` at it.

Dev perplexity during training:

| step | {unit} | forward | backward | mean |
|---|---|---|---|---|
{curve}

License: {about['license']}.
"""
    write_text(output / "README.md", card)
    typer.echo(f"dev perplexity {last_dev.get('dev_ppl', nan):.1f}")


if __name__ == "__main__":
    typer.run(main)
