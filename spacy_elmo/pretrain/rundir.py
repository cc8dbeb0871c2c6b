"""The output directory of a run: one writer at a time, refuse to clobber another run,
never read it as corpus, check resumes."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from ..errors import ElmoError, Errors, Warnings, warn
from ..files import names
from ..files.atomic import is_temporary, sweep_stale, write_text
from ..files.lock import DirectoryLock
from .config import FROZEN_KEYS, PretrainConfig
from .corpus import pattern_holding, resolve_files
from .declaration import Override
from .vocab import Vocab

# What makes a directory hold a run worth keeping: a start that failed before its first
# checkpoint leaves only vocab.txt, config.json or metrics, which a new start replaces.
RUN_RESULTS = (names.CHECKPOINT_NAME, *names.RUN_DIRS)
# The optimizer a checkpoint's state belongs to, by a key of its first parameter group: the
# first mark found in this order names it (LazyAdam's groups have Adam's `betas` too).
OPTIMIZER_MARKS = {"lazyadam": "lazy_rows", "adam": "betas", "adagrad": "lr_decay"}


def command_settings(path: Optional[Union[str, Path]], overrides: Sequence[Override], *,
                     resume: bool) -> PretrainConfig:
    """The settings `spacy-elmo pretrain` runs with: the config file's (the defaults without
    one) or, for --resume without one, those the run in --output recorded (its config.json);
    then the overrides."""
    output = next((value for key, value, _ in reversed(overrides) if key == "paths.output"),
                  None)
    if path is None and resume:
        if output is None:  # the default run directory
            output = PretrainConfig.load(None, overrides).output
        record = Path(str(output)) / names.CONFIG_NAME
        if record.exists():
            return PretrainConfig.from_record(record, overrides)
    return PretrainConfig.load(path, overrides)


def recorded(out: Path) -> Optional[PretrainConfig]:
    """The settings the run in `out` recorded (None without a config.json that reads as
    one)."""
    try:
        return PretrainConfig.from_record(out / names.CONFIG_NAME)
    except ElmoError:
        return None


def check_run_dir(out: Path, *, resume: bool, overwrite: bool) -> None:
    """Raise unless the directory may be used as asked (read-only: safe on every rank).

    A new run goes into a new or empty directory, the leftovers of a start that failed
    before its first checkpoint, or (with `overwrite`) a run; never into a directory of
    other files (an export, a pipeline), whose vocab.txt or config.json it would replace."""
    if out.exists() and not out.is_dir():
        raise ElmoError(Errors.E028.format(path=out, what="--output is the run directory"))
    if resume:
        if not (out / names.CHECKPOINT_NAME).exists():
            raise ElmoError(Errors.E107.format(path=out, name=names.CHECKPOINT_NAME))
    elif any((out / name).exists() for name in RUN_RESULTS):
        if not overwrite:
            raise ElmoError(Errors.E106.format(path=out, what="pretraining run"))
    elif out.is_dir():
        foreign = [entry.name for entry in sorted(out.iterdir()) if not _leftover(entry)]
        if foreign:
            raise ElmoError(Errors.E122.format(path=out, names=", ".join(foreign[:5])))


def resumable(out: Path) -> bool:
    """Whether `out` holds a run that --resume continues (its checkpoint); False where
    there is none yet (--resume then starts one). A run that lost its checkpoint but kept
    an export or snapshots cannot be continued, and starting over would be refused (E106):
    E173 names its latest export to start a new run from."""
    if (out / names.CHECKPOINT_NAME).exists():
        return True
    steps = sorted((d for d in (out / names.SNAPSHOT_DIR).glob(f"{names.SNAPSHOT_PREFIX}*")
                    if d.name.removeprefix(names.SNAPSHOT_PREFIX).isdigit()
                    and (d / names.WEIGHTS_NAME).is_file()),
                   key=lambda d: int(d.name.removeprefix(names.SNAPSHOT_PREFIX))
                   ) if (out / names.SNAPSHOT_DIR).is_dir() else []
    latest = steps[-1] if steps else out / names.MODEL_DIR
    if (latest / names.WEIGHTS_NAME).is_file():
        raise ElmoError(Errors.E173.format(path=out, name=names.CHECKPOINT_NAME, latest=latest))
    return False


def _leftover(entry: Path) -> bool:
    """A file a failed start of a run leaves (or its log, or a temporary file)."""
    if entry.name == names.CONFIG_NAME:
        return recorded(entry.parent) is not None
    return (entry.name in names.RUN_FILES and entry.is_file() or entry.suffix == ".log"
            or entry.name == names.LOCK_NAME or is_temporary(entry.name))


class RunLock:
    """The lock of a run directory (`files.lock.DirectoryLock`), taken by the process that
    writes the run (rank 0 under torchrun; `active` False on the others): `take` when the
    directory exists (again after creating it), held until the `with` block ends, however
    it ends. A second writer is refused (E071) naming the holder."""

    def __init__(self, out: Path, *, active: bool = True) -> None:
        self.lock = DirectoryLock(out) if active else None

    def take(self) -> None:
        if self.lock is not None and self.lock.directory.is_dir():
            self.lock.acquire()

    def __enter__(self) -> RunLock:
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.lock is not None:
            self.lock.release()


def train_files(config: PretrainConfig) -> List[Path]:
    """The run's training files: never one inside its own output directory (found by a
    directory or glob pattern above it)."""
    return resolve_files(config.train, exclude=Path(config.output), what="training")


def dev_files(config: PretrainConfig) -> List[Path]:
    """The run's dev files, as `train_files`."""
    return resolve_files(config.dev, exclude=Path(config.output), what="dev")


def warn_inside_corpus(config: PretrainConfig) -> None:
    """W018 when the run directory lies where a corpus pattern looks for files."""
    pattern = pattern_holding([*config.train, *config.dev], Path(config.output))
    if pattern is not None:
        warn(Warnings.W018.format(output=config.output, pattern=pattern), stacklevel=2)


def check_inputs(config: PretrainConfig, out: Path) -> None:
    """Refuse inputs that a new start in `out` would delete or replace before reading
    them: a file named as one of the run's, or anything in its model/ or snapshots/."""
    owned = [(out / name).resolve() for name in names.RUN_FILES + names.RUN_DIRS]
    inputs: List[Tuple[str, Optional[str]]] = [
        ("--vocab", config.vocab), ("--init-weights", config.init_weights),
        ("--init-options", config.init_options)]
    inputs += [("training file", str(f)) for f in train_files(config)]
    inputs += [("dev file", str(f)) for f in dev_files(config)] if config.dev else []
    for what, given in inputs:
        if given is None or "://" in given:
            continue
        path = Path(given).resolve()
        hit = next((o for o in owned if path == o or o in path.parents), None)
        if hit is not None:
            raise ElmoError(Errors.E123.format(what=what, input=given, path=out,
                                               name=hit.name))


def check_resume_vocab(config: PretrainConfig, words: List[str], out: Path) -> None:
    """A resumed run trains on the vocabulary in its checkpoint (`words`): a `vocab` other
    than the one the run recorded (its config.json) is refused unless it lists the same
    words in the same order (E168), so that config.json never names a vocabulary the run
    did not train with."""
    record = recorded(out)
    if config.vocab is None or record is not None and record.vocab == config.vocab:
        return  # the run's own
    if Vocab.from_file(Path(config.vocab)).words != list(words):
        raise ElmoError(Errors.E168.format(vocab=config.vocab, path=out, n=len(words)))


def clear_run(out: Path) -> None:
    """Remove every file of a previous run (and nothing else) before a new start."""
    for name in names.RUN_FILES:
        (out / name).unlink(missing_ok=True)
    for name in names.RUN_DIRS:
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
    known by name and size (`train_files`), not by path (`train`, the patterns), so a run
    continues on another machine or with its data moved."""
    data = config.to_dict()
    frozen = {key: data[key] for key in FROZEN_KEYS if key not in ("options", "train")}
    frozen["train_files"] = [[f.name, f.stat().st_size] for f in train_files(config)]
    for section, values in options.items():
        if isinstance(values, dict):
            frozen.update({f"options.{section}.{k}": v for k, v in values.items()})
        else:
            frozen[f"options.{section}"] = values
    return json.loads(json.dumps(frozen))


def check_resume(saved: Dict[str, Any], current: Dict[str, Any], out: Path,
                 files: Sequence[Path] = ()) -> None:
    """Refuse to resume with settings other than the checkpoint's `frozen` ones (E105);
    other training files (E142) are named by the paths `files` gives (the corpus now)."""
    # the files are known by name and size (train_files); the patterns (train), which the
    # checkpoints of spacy-elmo 0.1 recorded too, may change
    for key in sorted((set(saved) | set(current)) - {"train"}):
        if saved.get(key) == current.get(key):
            continue
        if key == "train_files" and files:
            raise ElmoError(Errors.E142.format(path=out, diff=files_differ(saved[key],
                                                                           files)))
        raise ElmoError(Errors.E105.format(path=out, key=key, found=saved.get(key),
                                           given=current.get(key)))


def files_differ(recorded: List[List[Any]], files: Sequence[Path]) -> str:
    """How the corpus `files` differs from a checkpoint's [name, size] records, naming the
    files of the corpus by their paths."""
    now = [(f.name, f.stat().st_size) for f in files]
    before = [(str(name), int(size)) for name, size in recorded]
    missing = list((Counter(before) - Counter(now)).elements())
    extra = list((Counter(now) - Counter(before)).elements())
    parts = []
    for name, size in list(missing):
        path = next((f for f, key in zip(files, now, strict=True)
                     if key in extra and key[0] == name), None)
        if path is not None:  # the same name, another size: other text
            parts.append(f"'{path}' has {path.stat().st_size:,} bytes, the run read "
                         f"{size:,} under that name")
            missing.remove((name, size))
            extra.remove((path.name, path.stat().st_size))
    if missing:
        parts.append("the checkpoint records " + ", ".join(
            f"{name} ({size:,} bytes)" for name, size in missing) + ", which this corpus lacks")
    if extra:
        paths = [str(f) for f, key in zip(files, now, strict=True) if key in extra]
        parts.append("this corpus has " + ", ".join(paths) + ", which the run did not read")
    if not parts:
        parts.append("the same files in another order (the run read "
                     + ", ".join(name for name, _ in before) + "; this corpus gives "
                     + ", ".join(str(f) for f in files) + ")")
    return "; ".join(parts)


def read_metrics(path: Path) -> List[Dict[str, Any]]:
    """The records of a run's metrics.jsonl ([] when there is none). A line that is not a
    whole JSON record (the torn end of a crash or a full disk) is skipped."""
    if not path.exists():
        return []
    records = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(record, dict):
            records.append(record)
    return records


def truncate_metrics(path: Path, step: int) -> None:
    """Drop records logged after the checkpoint being resumed (they will be redone)."""
    if path.exists():
        keep = [r for r in read_metrics(path) if r.get("step", 0) <= step]
        write_text(path, "".join(json.dumps(r) + "\n" for r in keep))
