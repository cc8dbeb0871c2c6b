"""The output directory of a run: refuse to clobber another run, check resumes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any, Dict

from ..bilm.files import sweep_stale, write_text
from ..errors import ElmoError, Errors
from .checkpoint import CHECKPOINT_NAME, SNAPSHOT_DIR
from .config import FROZEN_KEYS, PretrainConfig
from .corpus import resolve_files

CONFIG_NAME = "config.json"
METRICS_NAME = "metrics.jsonl"
CURVES_NAME = "curves.png"
MODEL_DIR = "model"
RUN_FILES = (CHECKPOINT_NAME, CONFIG_NAME, METRICS_NAME, CURVES_NAME, "vocab.txt")
RUN_DIRS = (MODEL_DIR, SNAPSHOT_DIR)
# What makes a directory hold a run worth keeping: a start that failed before its first
# checkpoint leaves only vocab.txt, config.json or metrics, which a new start replaces.
RUN_RESULTS = (CHECKPOINT_NAME, *RUN_DIRS)
# The optimizer a checkpoint's state belongs to, by a setting only it has.
# the first mark found names the optimizer of a saved state (LazyAdam groups also have betas)
OPTIMIZER_MARKS = {"lazyadam": "lazy_rows", "adam": "betas", "adagrad": "lr_decay"}


def check_output(out: Path, *, resume: bool, overwrite: bool) -> None:
    """Raise unless the directory may be used as asked (read-only: safe on every rank)."""
    if out.exists() and not out.is_dir():
        raise ElmoError(Errors.E028.format(path=out, what="--output is the run directory"))
    if resume:
        if not (out / CHECKPOINT_NAME).exists():
            raise ElmoError(Errors.E107.format(path=out, name=CHECKPOINT_NAME))
    elif any((out / name).exists() for name in RUN_RESULTS) and not overwrite:
        raise ElmoError(Errors.E106.format(path=out, what="pretraining run"))


def clear_run(out: Path) -> None:
    """Remove every file of a previous run (and nothing else) before a new start."""
    for name in RUN_FILES:
        (out / name).unlink(missing_ok=True)
    for name in RUN_DIRS:
        if (out / name).is_dir():
            shutil.rmtree(out / name)
    if out.is_dir():
        sweep_stale(out)


def check_optimizer(state: Dict[str, Any], optimizer: str, out: Path) -> None:
    """Refuse to resume a checkpoint's optimizer state with another optimizer."""
    groups = state.get("param_groups") or [{}]
    found = next((name for name, mark in OPTIMIZER_MARKS.items() if mark in groups[0]), None)
    if found is not None and found != optimizer:
        raise ElmoError(Errors.E105.format(path=out, key="optimizer", found=found,
                                           given=optimizer))


def frozen_settings(config: PretrainConfig, options: Dict[str, Any]) -> Dict[str, Any]:
    """The settings a resumed run must share with the checkpoint. The training files are
    known by name and size (`train_files`), not by path, so a run continues on another
    machine or with its data moved; `train` (the patterns) is kept for checkpoints written
    before `train_files` existed."""
    data = config.to_dict()
    frozen = {key: data[key] for key in FROZEN_KEYS if key != "options"}
    frozen["train_files"] = [[f.name, f.stat().st_size] for f in resolve_files(config.train)]
    for section, values in options.items():
        if isinstance(values, dict):
            frozen.update({f"options.{section}.{k}": v for k, v in values.items()})
        else:
            frozen[f"options.{section}"] = values
    return json.loads(json.dumps(frozen))


def check_resume(saved: Dict[str, Any], current: Dict[str, Any], out: Path) -> None:
    # a checkpoint with train_files knows its data by name and size: paths may change
    skip = "train" if "train_files" in saved else "train_files"
    for key in sorted((set(saved) | set(current)) - {skip}):
        if saved.get(key) != current.get(key):
            raise ElmoError(Errors.E105.format(path=out, key=key, found=saved.get(key),
                                               given=current.get(key)))


def truncate_metrics(path: Path, step: int) -> None:
    """Drop records logged after the checkpoint being resumed (they will be redone)."""
    if not path.exists():
        return
    lines = path.read_text(encoding="utf-8").splitlines()
    keep = [line for line in lines if line and json.loads(line).get("step", 0) <= step]
    write_text(path, "".join(line + "\n" for line in keep))
