"""`spacy-elmo pretrain` (a config file with `--section.key` overrides, as `spacy train`
takes, plus the shortcut flags of each setting) and `spacy-elmo init-pretrain-config`."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import List, Optional

import typer
from wasabi import msg

from ..errors import ElmoError, Errors, Warnings, warn
from ..files.atomic import write_text
from ..files.guard import STDOUT, guard_output
from ..files.signals import Terminated
from ..pretrain import declaration
from ..pretrain.config import CONFIG_SUFFIXES, PretrainConfig, default_settings
from ..pretrain.stopping import Aborted
from .common import app, fail


def _escape(text: str) -> str:
    """Text for typer's help, which reads [...] as rich markup when rich is installed."""
    try:
        from rich.markup import escape
    except ImportError:  # plain click help
        return text
    return escape(text)


EPILOG = _escape(
    "Settings: in CONFIG, key = value under [section]; on the command line, --section.key "
    "VALUE (VALUE read as JSON, else as text) or the shortcut flag in parentheses. Each "
    "shows its default.\n\n\b\n" + "\n".join(declaration.help_lines(PretrainConfig)))


@app.command("pretrain", epilog=EPILOG,
             context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def pretrain_cli(
    args: Optional[List[str]] = typer.Argument(
        None, metavar="CONFIG TEXT --section.key VALUE",
        help="A .cfg config file, then training text (files, globs or directories; they "
             "replace the config's train), then settings to override"),
    gpu_id: Optional[int] = typer.Option(
        None, "--gpu-id",
        help="CUDA device to train on (-1: the CPU; default: the config's device, auto = a "
             "GPU if there is one)"),
    resume: bool = typer.Option(
        False, "--resume", help="Continue the run in --output (start one if there is none)"),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace the run in --output"),
    dry_run: bool = typer.Option(
        False, "--dry-run", help="Check the settings, print them as a .cfg file and exit"),
) -> None:
    """Pretrain (or domain-adapt) a biLM on raw text. Resumable; runs under torchrun.

    spacy-elmo pretrain CONFIG.cfg [TEXT]... [--section.key VALUE]...: the settings of a
    config file (`spacy-elmo init-pretrain-config` writes one), overridden on the command
    line. Without a config file, the defaults: spacy-elmo pretrain TEXT... --output RUN
    --max-steps N. Continue a run: spacy-elmo pretrain --output RUN --resume (its own
    config.json; a larger --max-steps trains on)."""
    from ..pretrain.config import read_command_line
    from ..pretrain.rundir import command_settings, resumable
    from ..pretrain.trainer import train as run_training

    try:
        path, overrides = read_command_line(args or [])
        if gpu_id is not None:
            overrides.append(("system.device", "cpu" if gpu_id < 0 else f"cuda:{gpu_id}",
                              "--gpu-id"))
        cfg = command_settings(path, overrides, resume=resume)
        if dry_run:
            typer.echo(cfg.to_cfg())
            return
        if not cfg.train:
            raise ElmoError(Errors.E113)
        if resume and overwrite:
            raise ElmoError(Errors.E121.format(path=cfg.output))
        if resume and not resumable(Path(cfg.output)):
            msg.info(f"No checkpoint in {cfg.output} yet: starting the run.")
            resume = False
        result = run_training(cfg, resume=resume, overwrite=overwrite)
    except ElmoError as err:
        fail(str(err))
    except Aborted as err:  # a second signal during the stop
        fail(Errors.E172.format(signal=signal.Signals(err.signum).name,
                                output=cfg.output), code=128 + err.signum)
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
    if main_rank and result.trained == 0:
        why = ("max_steps" if result.step >= cfg.max_steps
               else "its time budget, max_minutes / max_cpu_minutes, is spent")
        msg.good(f"Already at step {result.step} ({why}): nothing to train; model "
                 f"exported again to {cfg.output}/model")
    elif main_rank:
        msg.good(f"Trained {result.trained} step(s), to step {result.step}; model exported "
                 f"to {cfg.output}/model")


@app.command("init-pretrain-config")
def init_pretrain_config_cli(
    output: str = typer.Argument(..., help=(
        "The .cfg file to write ('.cfg' is added to a name without it; '-': standard "
        "output)")),
    preset: Optional[str] = typer.Option(
        None, "--preset",
        help="Model size: tiny, small, medium or original (default: null, which is tiny for "
             "a new biLM and the weights' shape with init_weights)"),
    lang: Optional[str] = typer.Option(None, "--lang",
                                       help="spaCy language of the text ('en', 'zh', ...)"),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace OUTPUT if it exists"),
) -> None:
    """Write a pretraining config with every setting at its default.

    As `spacy init config` does for training: edit it, then `spacy-elmo pretrain CONFIG`."""
    try:
        if output != STDOUT and not output.endswith(".cfg"):
            if output.endswith(CONFIG_SUFFIXES):  # a .json name for .cfg text: never read
                guard_output(output, overwrite=True)  # a run's or a model's file: said so
                raise ElmoError(Errors.E169.format(path=output, suggestion=str(
                    Path(output).with_suffix(".cfg"))))
            output += ".cfg"  # as pretrain tells a config from training text by its name
        path = guard_output(output, overwrite=overwrite, what="the config", stdout_ok=True)
        text = default_settings(preset_name=preset, lang=lang).to_cfg()
        if path is None:
            typer.echo(text, nl=False)
            return
        write_text(path, text)
    except ElmoError as err:
        fail(str(err))
    msg.good(f"Wrote {path}", f"Run it with: spacy-elmo pretrain {path} TEXT...")
