"""Reading a JSON object from a file (a damaged one is E002) and writing one atomically."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict

from ..errors import ElmoError, Errors, damaged
from .atomic import write_text


def read_json_object(path: Path, kind: str) -> Dict[str, Any]:
    """The JSON object in a file; E001 when it is missing, E002 (naming it `kind`, e.g. "a
    JSON config") when it cannot be read or parsed, or holds something else."""
    if not path.exists():
        raise ElmoError(Errors.E001.format(path=path, cwd=Path.cwd()))
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise damaged(path, kind, err) from err
    if not isinstance(data, dict):
        raise damaged(path, kind, "the top level is not an object")
    return data


def write_json(path: Path, data: Any) -> None:
    """Write `data` as indented JSON (a final newline), atomically."""
    write_text(path, json.dumps(data, indent=2) + "\n")
