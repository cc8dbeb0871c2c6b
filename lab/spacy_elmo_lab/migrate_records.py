"""Bring table cell records (archived `benchmarks/results/cells*/*.json`, or local
`training/*/cell.json`) up to today's table, in place and idempotently:

- a record without input digests gets its biLM's, as git held it at the commit that added
  the record (`cell_inputs.digest_in_git`; a biLM never committed is left without, and said);
- a record of a config whose shipped default has moved since gets the settings it was
  trained with written out (`table.PINNED`), as today's rows write them.

    python -m spacy_elmo_lab.migrate_records benchmarks/results/cells*/*.json training/*/cell.json
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List

import typer

from .cell_inputs import command_paths, digest_in_git
from .messages import one_line_errors
from .table import TABLES, Task, pinned_settings, settings

TASKS: Dict[str, Task] = {name: task for tasks in TABLES.values() for name, task in tasks.items()}


def task_of(run: str) -> Task:
    """The task of a cell's run name (<task>_<row>_s<seed>; task names have no "_")."""
    task = TASKS.get(run.split("_")[0])
    if task is None:
        raise typer.BadParameter(f"{run}: no table task starts this run name")
    return task


def pinned(command: str, task: Task) -> str:
    """`command` with the PINNED settings of its config that it does not give (their values
    then were the config's defaults)."""
    config, options = settings(command)
    given = {flag for flag, _ in options}
    extra = [word for key, value in pinned_settings(task, Path(config).name).items()
             if f"--{key}" not in given for word in (f"--{key}", value)]
    return " ".join([command, *extra]) if extra else command


def migrate(record: Dict[str, Any], path: Path, run: str) -> List[str]:
    """Bring one record up to date in place; what changed, in words."""
    task = task_of(run)
    changes = []
    command = record.get("command", "")
    now = pinned(command, task)
    if now != command:
        record["command"] = now
        changes.append("pinned " + now[len(command):].strip())
    weights = command_paths(command.split()).get("elmo_weights")
    if "inputs" not in record and weights is not None:
        digest = digest_in_git(path, weights, task.lang)
        if digest is None:
            typer.echo(f"{path}: {weights} is not in git; left without digests", err=True)
        else:
            record["inputs"] = {"elmo_weights": digest}
            changes.append(f"{weights} {digest[:12]}")
    return changes


def main(records: List[Path] = typer.Argument(..., help="cell records (JSON)")) -> None:
    """Bring cell records up to today's table (run it in the project directory)."""
    for path in records:
        record = json.loads(path.read_text(encoding="utf-8"))
        run = path.parent.name if path.name == "cell.json" else path.stem
        changes = migrate(record, path, run)
        if changes:
            order = ["command", "inputs"]
            items = {k: record[k] for k in order if k in record}
            items.update((k, v) for k, v in record.items() if k not in order)
            path.write_text(json.dumps(items, indent=2) + "\n", encoding="utf-8")
            typer.echo(f"{path}: {'; '.join(changes)}")


if __name__ == "__main__":
    typer.run(one_line_errors(main))
