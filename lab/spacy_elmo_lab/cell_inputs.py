"""What a table cell was trained from, by content: the digest of its biLM and of its static
vectors, recorded in its cell.json (`inputs`). A record made from other weights under the
same path (the bundled biLM of an earlier release) is then no finished cell, and one made
from the same weights under another path is (records from before the digests get them from
git history: `spacy_elmo_lab.migrate_records`)."""

from __future__ import annotations

import subprocess
from functools import cache
from pathlib import Path
from typing import Callable, Dict, List, Optional

from spacy_elmo.bilm.io.sources import BUNDLED, DATA_DIR
from spacy_elmo.checksums import content_sha256

# --paths.X whose content a cell's scores depend on, beside its command
CONTENT_PATHS = ("elmo_weights", "vectors")
# the files of a biLM directory that decide what it computes (not its model card)
BILM_FILES = ("weights.hdf5", "options.json")


def location(value: str, lang: str) -> Path:
    """The path a `--paths.X` value names; "null" for a biLM is the one bundled for `lang`."""
    if value == "null":
        return DATA_DIR / BUNDLED.get(lang, BUNDLED["en"])
    return Path(value)


def bilm_digest(read: Callable[[str], Optional[bytes]]) -> str:
    """The content of a biLM's BILM_FILES, each read by `read(name)` (None: absent); ""
    when it has none."""
    files = {name: data for name in BILM_FILES if (data := read(name)) is not None}
    return content_sha256(files) if files else ""


@cache
def path_digest(path: Path) -> str:
    """The content of a biLM (its weights and options), a directory (every file under it)
    or a file; "" when it does not exist."""
    if path.is_file():
        return content_sha256({path.name: path.read_bytes()})
    if (path / BILM_FILES[0]).is_file():
        return bilm_digest(lambda name: (path / name).read_bytes()
                           if (path / name).is_file() else None)
    if path.is_dir():
        return content_sha256({str(p.relative_to(path)): p.read_bytes()
                               for p in path.rglob("*") if p.is_file()})
    return ""


def command_paths(command: List[str]) -> Dict[str, str]:
    """The CONTENT_PATHS values a `spacy train` command gives."""
    found = {}
    for flag, value in zip(command, command[1:], strict=False):
        key = flag.removeprefix("--paths.")
        if flag.startswith("--paths.") and key in CONTENT_PATHS:
            found[key] = value
    return found


def input_digests(command: List[str], lang: str) -> Dict[str, str]:
    """The digest of each CONTENT_PATHS input of a cell's command that exists here."""
    digests = {key: path_digest(location(value, lang))
               for key, value in command_paths(command).items()}
    return {key: value for key, value in digests.items() if value}


def digest_in_git(record: Path, weights: str, lang: str) -> Optional[str]:
    """The digest of the biLM `weights` names ("null": the one bundled for `lang`) as git
    held it at the newest commit that wrote `record`'s scores (a cell trained again under
    its name has its new scores committed with it); None where git has no such biLM."""
    commits = subprocess.run(["git", "log", "-G", '"test":', "--format=%H", "--", str(record)],
                             capture_output=True, text=True, check=True).stdout.split()
    if not commits:
        return None
    where = location(weights, lang)
    if where.is_absolute():
        where = where.relative_to(Path.cwd())

    def show(name: str) -> Optional[bytes]:
        blob = subprocess.run(["git", "show", f"{commits[0]}:{where.as_posix()}/{name}"],
                              capture_output=True, check=False)
        return blob.stdout if blob.returncode == 0 else None

    return bilm_digest(show) or None
