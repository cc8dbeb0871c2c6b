"""The names of temporary files (`atomic`'s): they carry the host and the process id, so
that a later write into the same directory removes those a killed process (SIGKILL, a power
loss) left behind."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import socket
from pathlib import Path

_HOST = hashlib.sha1(socket.gethostname().encode()).hexdigest()[:8]
_TMP_NAME = re.compile(r"\.tmp-([0-9a-f]{8})-(\d+)-")


def temporary_prefix() -> str:
    """The start of the name of a temporary file this process writes."""
    return f".tmp-{_HOST}-{os.getpid()}-"


def is_temporary(name: str) -> bool:
    """Whether `name` is a temporary file of `atomic_write` (any host, any process)."""
    return _TMP_NAME.match(name) is not None


def sweep_stale(directory: Path) -> None:
    """Remove temporary files of this host's processes that no longer run (killed with
    SIGKILL, or the machine lost power, while they wrote)."""
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return
    for entry in entries:
        match = _TMP_NAME.match(entry.name)
        if match is None or match.group(1) != _HOST or _alive(int(match.group(2))):
            continue
        try:
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path)
            else:
                os.unlink(entry.path)
        except OSError:  # another process swept it first, or no permission: leave it
            pass


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # e.g. another user's process
        return True
    return True
