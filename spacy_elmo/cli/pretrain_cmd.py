"""`spacy-elmo pretrain` (a config file with `--section.key` overrides, as `spacy train`
takes, plus the shortcut flags of each setting) and `spacy-elmo init-pretrain-config`."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import typer
from wasabi import msg

from ..errors import ElmoError, Errors, Warnings, warn
from ..files import STDOUT, Terminated, guard_output, write_text
from ..pretrain import settings
from ..pretrain.config import PretrainConfig, default_settings
from ..pretrain.stopping import Aborted
from .common import app, fail

CONFIG_SUFFIXES = (".cfg", ".json")
Override = Tuple[str, Any, str]  # (section.key, value, the flag as written)


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
    "shows its default.\n\n\b\n" + "\n".join(settings.help_lines(PretrainConfig)))


@app.command("pretrain", epilog=EPILOG,
             context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def pretrain_cli(
    args: Optional[List[str]] = typer.Argument(
        None, metavar="CONFIG TEXT --section.key VALUE",
        help="A config file (.cfg, or a JSON one), then training text (files, globs or "
             "directories; they replace the config's train), then settings to override"),
    config: Optional[Path] = typer.Option(
        None, "--config", "-c",
        help="The config file, as a flag (the form of earlier versions)"),
    gpu_id: Optional[int] = typer.Option(
        None, "--gpu-id",
        help="CUDA device to train on (-1: the CPU; default: the config's device, auto = a "
             "GPU if there is one)"),
    device: Optional[str] = typer.Option(
        None, "--device", hidden=True, help="Deprecated: --gpu-id (or --system.device)"),
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
    from ..pretrain.rundir import CONFIG_NAME, resumable
    from ..pretrain.trainer import train as run_training

    try:
        path, overrides = parse_args(args or [], config)
        overrides += device_overrides(gpu_id, device)
        output = next((v for k, v, _ in reversed(overrides) if k == "paths.output"), None)
        if path is None and resume and output is not None and (
                Path(str(output)) / CONFIG_NAME).exists():
            path = Path(str(output)) / CONFIG_NAME  # the run's own settings
        cfg = PretrainConfig.load(path, [(k, v) for k, v, _ in overrides],
                                  flags=[f for _, _, f in overrides])
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
        msg.good(f"Already at step {result.step} (max_steps): nothing to train; model "
                 f"exported again to {cfg.output}/model")
    elif main_rank:
        msg.good(f"Trained {result.trained} step(s), to step {result.step}; model exported "
                 f"to {cfg.output}/model")


def parse_args(args: Sequence[str], config: Optional[Path]
               ) -> Tuple[Optional[Path], List[Override]]:
    """The command line's config file (a first positional .cfg/.json file, or --config) and
    overrides in order: `--section.key VALUE` (parsed as spaCy parses them) and shortcut
    flags (parsed as their setting's type). A list setting (train, dev) takes every value
    up to the next flag, from all its flags together (`--dev a b --paths.dev c`: a, b, c;
    a JSON list counts as its items); the other positionals (TEXT) are training text
    before them. A true/false setting takes a following true/false/yes/no/1/0 (or a
    number, which its rule refuses), and stands alone for true."""
    from spacy.cli._util import parse_config_overrides

    shortcuts = settings.by_flag(PretrainConfig)
    known = settings.by_path(PretrainConfig)
    positionals: List[str] = []
    overrides: List[Override] = []
    lists: Dict[str, List[Any]] = {}
    rest = list(args)
    while rest:
        token = rest.pop(0)
        if not _is_flag(token):
            positionals.append(token)
            continue
        name, _, inline = token.partition("=")
        value: Optional[str] = inline if "=" in token else None
        path = name.lstrip("-").replace("-", "_")
        item = shortcuts.get(name) if "." not in path else known.get(".".join(
            path.split(".")[:2]))
        if item is None and "." not in path:
            raise ElmoError(Errors.E127.format(flag=name,
                                               close=settings.suggest(PretrainConfig, name)))
        if item is not None and isinstance(item.default, list) and path.count(".") <= 1:
            values = [] if value is None else [value]
            while rest and not _is_flag(rest[0]):
                values.append(rest.pop(0))
            if not values:
                raise ElmoError(Errors.E132.format(flag=name))
            _list_of(item.path, lists, overrides, name).extend(
                entry for text in values for entry in settings.list_items(text))
            continue
        takes_bool = item is not None and item.is_bool
        if value is None and rest and not rest[0].startswith("--") and (
                not takes_bool or settings.is_bool_word(rest[0])):
            value = rest.pop(0)
        if "." in path:  # spaCy's reading of an override: JSON, else text
            parsed = parse_config_overrides([f"--{path}"] + ([value] if value is not None
                                                              else []), env_var=None)
            overrides.append((path, parsed[path], name))
        elif item is not None:
            if value is None and not takes_bool:
                raise ElmoError(Errors.E132.format(flag=name))
            overrides.append((item.path, settings.parse_flag(value, item.hint), name))
    path_arg: Optional[Path] = None
    if positionals and positionals[0].endswith(CONFIG_SUFFIXES) and not Path(
            positionals[0]).is_dir():  # a config file, even a missing one (then its error)
        path_arg = Path(positionals.pop(0))
    if path_arg is not None and config is not None:
        raise ElmoError(Errors.E130.format(first=f"CONFIG '{path_arg}'",
                                           second=f"--config '{config}'",
                                           what="the config file"))
    if positionals:  # TEXT: training text, before any given with --train
        _list_of("paths.train", lists, overrides, "TEXT")[:0] = positionals
    return path_arg or config, overrides


def _is_flag(token: str) -> bool:
    return token.startswith("-") and token != "-"


def _list_of(path: str, lists: Dict[str, List[Any]], overrides: List[Override],
             flag: str) -> List[Any]:
    """The one list that every command-line value of a list setting goes into (its
    override is where the setting was first given)."""
    if path not in lists:
        lists[path] = []
        overrides.append((path, lists[path], flag))
    return lists[path]


def device_overrides(gpu_id: Optional[int], device: Optional[str]) -> List[Override]:
    """--gpu-id N as system.device (cuda:N; -1: cpu); the deprecated --device, warned."""
    if gpu_id is not None and device is not None:
        raise ElmoError(Errors.E130.format(first="--gpu-id", second="--device",
                                           what="the device"))
    if device is not None:
        warn(Warnings.W015.format(value=device))
        return [("system.device", device, "--device")]
    if gpu_id is not None:
        return [("system.device", "cpu" if gpu_id < 0 else f"cuda:{gpu_id}", "--gpu-id")]
    return []


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
