"""`spacy-elmo pretrain`, `spacy-elmo export` and `spacy-elmo perplexity`."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any, Dict, List, Optional

import typer
from wasabi import msg

from ..errors import ElmoError, Errors, Warnings
from ..files import Terminated, check_writable_path, write_json
from ..validation import check_all, integer, regex
from .common import app, fail, warn

CONFIG_HELP = ("JSON file with pretraining settings (keys as the flags, with underscores: "
               "train, dev, output, lang, preset, options, vocab_size, batch_size, window, "
               "n_negatives, optimizer, lr, lr_schedule, max_steps, ...). Flags override it.")


@app.command("pretrain")
def pretrain_cli(
    train: Optional[List[str]] = typer.Argument(
        None, help="Training text: files (.txt, .gz, .xz), globs or directories"),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Run directory"),
    config: Optional[Path] = typer.Option(None, "--config", "-c", help=CONFIG_HELP),
    dev: Optional[List[str]] = typer.Option(None, "--dev", help="Dev text for perplexity"),
    lang: Optional[str] = typer.Option(
        None, "--lang", help="spaCy language for tokenization ('en', 'zh', ...) or 'whitespace'"),
    segmenter: Optional[str] = typer.Option(
        None, "--segmenter", help="Chinese word segmentation: char (default) or jieba"),
    preset: Optional[str] = typer.Option(None, "--preset",
                                         help="Model size: tiny, small, medium, original"),
    options: Optional[str] = typer.Option(
        None, "--options", help='JSON overrides of the preset, e.g. \'{"lstm_dim": 512}\''),
    vocab: Optional[str] = typer.Option(None, "--vocab", help="Use this vocab.txt"),
    vocab_size: Optional[int] = typer.Option(None, "--vocab-size", help="Softmax vocabulary"),
    batch_size: Optional[int] = typer.Option(None, "--batch-size", help="Rows per process"),
    shuffle_buffer: Optional[int] = typer.Option(
        None, "--shuffle-buffer",
        help="Draw sentences at random from a buffer of this many (default 10000; 0: in order)"),
    window: Optional[int] = typer.Option(None, "--window", help="Tokens per truncated-BPTT window"),
    n_negatives: Optional[int] = typer.Option(None, "--n-negatives", help="Sampled negatives"),
    optimizer: Optional[str] = typer.Option(
        None, "--optimizer",
        help="adagrad, adam or lazyadam (Adam; softmax rows move only when sampled)"),
    lr: Optional[float] = typer.Option(None, "--lr", help="Learning rate"),
    state_reset: Optional[float] = typer.Option(
        None, "--state-reset",
        help="Probability that a row's carried LSTM state is zeroed before a window"),
    lr_schedule: Optional[str] = typer.Option(
        None, "--lr-schedule", help="constant, linear, cosine or inverse_sqrt"),
    max_steps: Optional[int] = typer.Option(None, "--max-steps", help="Stop after this step"),
    max_minutes: Optional[float] = typer.Option(
        None, "--max-minutes",
        help="Also stop (evaluate, checkpoint, export) after this many minutes of training "
             "steps, summed over resumes: runs of equal time budget"),
    max_cpu_minutes: Optional[float] = typer.Option(
        None, "--max-cpu-minutes",
        help="The same for the process's CPU time (all threads): equal compute budgets on a "
             "machine shared with other work"),
    eval_every: Optional[int] = typer.Option(None, "--eval-every", help="Dev eval interval"),
    checkpoint_every: Optional[int] = typer.Option(None, "--checkpoint-every",
                                                   help="Checkpoint interval in steps"),
    checkpoint_minutes: Optional[float] = typer.Option(
        None, "--checkpoint-minutes", help="Also checkpoint after this many minutes"),
    snapshot_every: Optional[int] = typer.Option(
        None, "--snapshot-every",
        help="Also export the model to OUTPUT/snapshots/step_N/ (with its dev perplexity) "
             "every N steps: the checkpoints a perplexity-vs-score plot needs"),
    init_weights: Optional[str] = typer.Option(
        None, "--init-weights",
        help="Start from a published biLM: weights.hdf5, its directory, a URL or a name "
             "such as allennlp/small"),
    init_options: Optional[str] = typer.Option(None, "--init-options",
                                               help="options.json of --init-weights"),
    threads: Optional[int] = typer.Option(None, "--threads", help="torch CPU threads"),
    device: Optional[str] = typer.Option(
        None, "--device", help="cpu, cuda, cuda:N or auto (default: a GPU if there is one)"),
    precision: Optional[str] = typer.Option(
        None, "--precision",
        help="fp32 (default) or bf16: bf16 matmuls over fp32 weights, optimizer and cell "
             "state; pays on GPUs and on CPUs with AVX512-BF16/AMX only"),
    lstm_backward: Optional[str] = typer.Option(
        None, "--lstm-backward",
        help="fused (default: a hand-written LSTM backward) or autograd (the reference)"),
    seed: Optional[int] = typer.Option(None, "--seed", help="Random seed"),
    resume: bool = typer.Option(
        False, "--resume", help="Continue the run in --output (start one if there is none)"),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace the run in --output"),
) -> None:
    """Pretrain (or domain-adapt) a biLM on raw text. Resumable; runs under torchrun."""
    from ..pretrain.checkpoint import CHECKPOINT_NAME
    from ..pretrain.config import PretrainConfig
    from ..pretrain.rundir import CONFIG_NAME
    from ..pretrain.trainer import train as run_training

    flags: Dict[str, Any] = {"train": train or None, "output": str(output) if output else None,
             "dev": dev or None, "lang": lang, "segmenter": segmenter, "preset": preset,
             "options": None, "vocab": vocab,
             "vocab_size": vocab_size, "batch_size": batch_size,
             "shuffle_buffer": shuffle_buffer, "window": window,
             "n_negatives": n_negatives, "optimizer": optimizer, "lr": lr,
             "state_reset": state_reset,
             "lr_schedule": lr_schedule, "max_steps": max_steps, "max_minutes": max_minutes,
             "max_cpu_minutes": max_cpu_minutes,
             "eval_every": eval_every,
             "checkpoint_every": checkpoint_every, "checkpoint_minutes": checkpoint_minutes,
             "snapshot_every": snapshot_every,
             "init_weights": init_weights, "init_options": init_options, "threads": threads,
             "device": device, "precision": precision, "lstm_backward": lstm_backward,
             "seed": seed}
    try:
        flags["options"] = parse_options(options)
        if config is None and resume and output is not None and (output / CONFIG_NAME).exists():
            config = output / CONFIG_NAME
        if config is not None:
            cfg = PretrainConfig.from_file(config, **flags)
        else:
            cfg = PretrainConfig(**{k: v for k, v in flags.items() if v is not None})
        if not cfg.train:
            raise ElmoError(Errors.E113)
        if resume and overwrite:
            raise ElmoError(Errors.E121.format(path=cfg.output))
        if resume and not (Path(cfg.output) / CHECKPOINT_NAME).exists():
            msg.info(f"No checkpoint in {cfg.output} yet: starting the run.")
            resume = False
        result = run_training(cfg, resume=resume, overwrite=overwrite)
    except ElmoError as err:
        fail(str(err))
    except KeyboardInterrupt:  # before the training loop, which turns it into a stop
        fail(Errors.E120.format(signal="Ctrl-C (SIGINT)"), code=130)
    except Terminated as err:
        fail(Errors.E120.format(signal=signal.Signals(err.signum).name), code=128 + err.signum)
    main_rank = int(os.environ.get("RANK", "0")) == 0
    if result.stopped:
        # not finished: a non-zero status, as the shell gives a process the signal killed
        signum = result.signum or signal.SIGTERM
        if main_rank:
            warn(Warnings.W011.format(signal=signal.Signals(signum).name, step=result.step,
                                      output=cfg.output))
        raise typer.Exit(128 + signum)
    if main_rank:
        msg.good(f"Trained {result.step} steps; model exported to {cfg.output}/model")


def parse_options(text: Optional[str]) -> Optional[Dict[str, Any]]:
    """The --options JSON object (None without the flag)."""
    if text is None:
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as err:
        raise ElmoError(Errors.E118.format(text=text, err=err)) from err
    if not isinstance(value, dict):
        raise ElmoError(Errors.E118.format(text=text, err="not a JSON object"))
    return value


@app.command("export")
def export_cli(
    checkpoint: Path = typer.Argument(..., help="A run directory or its checkpoint.pt"),
    output: Path = typer.Argument(..., help="Directory for options.json + weights.hdf5"),
    overwrite: bool = typer.Option(False, "--overwrite",
                                   help="Replace a model already in OUTPUT"),
) -> None:
    """Export a pretraining checkpoint: options.json + weights.hdf5 (bilm-tf layout),
    vocab.txt, and the softmax in softmax.hdf5."""
    from ..pretrain.export import EXPORT_FILES, export

    try:
        if not overwrite and any((output / name).exists() for name in EXPORT_FILES):
            raise ElmoError(Errors.E026.format(output=output))
        paths = export(checkpoint, output)
    except ElmoError as err:
        fail(str(err))
    msg.good(f"Exported to {output}", "\n".join(str(p) for p in paths.values()))


@app.command("perplexity")
def perplexity_cli(
    model: str = typer.Argument(..., help="An export (or snapshot) with softmax.hdf5 + vocab.txt"),
    text: List[str] = typer.Argument(..., help="Text files (.txt, .gz, .xz), globs or directories"),
    lang: str = typer.Option("whitespace", "--lang",
                             help="spaCy language for tokenization, as in pretraining"),
    segmenter: Optional[str] = typer.Option(
        None, "--segmenter", help="Chinese word segmentation, as in pretraining"),
    skip_pattern: Optional[str] = typer.Option(None, "--skip-pattern",
                                               help="Skip lines matching this regex"),
    max_tokens: Optional[int] = typer.Option(None, "--max-tokens",
                                             help="Stop after this many tokens"),
    rows: int = typer.Option(64, "--rows", help="Parallel streams (pretraining's batch size)"),
    window: int = typer.Option(20, "--window", help="Tokens per window"),
    threads: Optional[int] = typer.Option(None, "--threads", help="torch CPU threads"),
    output: Optional[Path] = typer.Option(None, "--output",
                                          help="Also write the figures to this JSON file"),
) -> None:
    """Full-softmax perplexity of an exported biLM language model on text: how well a biLM
    fits your domain, before and after domain adaptation."""
    import torch

    from ..pretrain.corpus import TextSettings, resolve_files
    from ..pretrain.perplexity import load_lm, text_perplexity

    try:
        check_all({"--rows": rows, "--window": window, "--max-tokens": max_tokens,
                   "--threads": threads},
                  {"--rows": integer(1), "--window": integer(1),
                   "--max-tokens": integer(1, optional=True),
                   "--threads": integer(1, optional=True)}, Errors.E020)
        check_all({"--skip-pattern": skip_pattern}, {"--skip-pattern": regex(optional=True)},
                  Errors.E020)
        if output is not None:
            check_writable_path(output, "a file name for the JSON")
        if threads:
            torch.set_num_threads(threads)
        lm, vocab = load_lm(model)
        result = text_perplexity(lm, vocab, resolve_files(text),
                                 TextSettings(lang=lang, segmenter=segmenter,
                                              skip_pattern=skip_pattern),
                                 rows=rows, window=window, max_tokens=max_tokens)
    except ElmoError as err:
        fail(str(err))
    msg.table({"forward": f"{result['dev_ppl_fwd']:.2f}",
               "backward": f"{result['dev_ppl_bwd']:.2f}",
               "mean": f"{result['dev_ppl']:.2f}",
               "mean per character": f"{result['ppl_per_char']:.2f}",
               "tokens": result["dev_tokens"]},
              title=f"Perplexity of {model}")
    if output is not None:
        try:
            write_json(output, {"model": model, "text": text, **result})
        except ElmoError as err:
            fail(str(err))
        except OSError as err:
            fail(Errors.E009.format(path=output, err=err))
