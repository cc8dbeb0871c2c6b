"""A write that cannot start or fails on a full disk (or quota), as a catalogue error that
says so (E024), with the space left; other reasons to be unable to write as E009."""

from __future__ import annotations

import errno
import os
import shutil
from pathlib import Path
from typing import Optional

from ..errors import ElmoError, Errors
from .temporary import is_temporary

_FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT)


class DiskFull(ElmoError):
    """A write failed because the disk (or the user's quota) is full."""


def cannot_write(err: OSError, path: Path) -> ElmoError:
    """The catalogue error for an OSError met while starting to write `path`: E024 for a
    full disk, else E009 with the reason (a read-only file system, no permission)."""
    full = _disk_full(err, path)
    if full is not None:
        return full
    name = str(err.filename or "")
    where = (f" ('{name}')" if name and name != str(path) and not is_temporary(Path(name).name)
             else "")
    return ElmoError(Errors.E009.format(path=path, err=f"{os.strerror(err.errno or 0)}{where}"))


def raise_if_full(err: BaseException, path: Path) -> None:
    """Raise DiskFull (from `err`) when `err` says the disk or quota is full."""
    full = _disk_full(err, path)
    if full is not None:
        raise full from err


def _disk_full(err: BaseException, path: Path) -> Optional[DiskFull]:
    """A `DiskFull` error for `path` if `err`, or an error it came from (torch wraps the
    OSError of a failed write in a RuntimeError), is ENOSPC/EDQUOT."""
    cause: Optional[BaseException] = err
    for _ in range(5):
        if cause is None:
            return None
        if isinstance(cause, OSError) and cause.errno in _FULL_ERRNOS:
            break
        cause = cause.__cause__ or cause.__context__
    else:
        return None
    try:
        free = f"{shutil.disk_usage(path.parent).free / 2**20:.1f} MB"
    except OSError:
        free = "unknown space"
    return DiskFull(Errors.E024.format(path=path, err=os.strerror(cause.errno), free=free,
                                       directory=path.parent))
