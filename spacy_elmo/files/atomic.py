"""Writing a file or a directory whole or not at all: a temporary one beside the target,
renamed over it when complete and removed on every other path (an exception, Ctrl-C, SIGTERM
or SIGHUP: `signals`; a full disk, reported as such: E024). Every file spacy-elmo writes goes
through `atomic_write`; a directory (an export, a snapshot) through `atomic_directory`.
Temporary names carry the host and the process id, so that a later write into the same
directory removes those a killed process (SIGKILL, a power loss) left behind."""

from __future__ import annotations

import ctypes
import errno
import hashlib
import os
import re
import shutil
import socket
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator, Optional

from ..errors import ElmoError, Errors
from .signals import signals_raise

_HOST = hashlib.sha1(socket.gethostname().encode()).hexdigest()[:8]
_TMP_NAME = re.compile(r"\.tmp-([0-9a-f]{8})-(\d+)-")
_FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT)


class DiskFull(ElmoError):
    """A write failed because the disk (or the user's quota) is full."""


@contextmanager
def atomic_write(path: Path, suffix: str = "") -> Iterator[Path]:
    """Yield a temporary path beside `path`; when the block succeeds it replaces `path`
    (with the mode a new file gets under the umask), and in any case it is gone after.
    A full disk raises `DiskFull`; other errors pass through."""

    def make(directory: Path) -> Path:
        fd, name = tempfile.mkstemp(prefix=_prefix(), suffix=suffix, dir=directory)
        os.close(fd)
        return Path(name)

    with _atomic(Path(path), make, 0o666, os.replace) as tmp:
        yield tmp


@contextmanager
def atomic_directory(path: Path) -> Iterator[Path]:
    """Yield a new, empty temporary directory beside `path`; when the block succeeds it
    takes the place of `path`. A directory already there is replaced as a whole, and kept
    until the new one is complete (on Linux the two are exchanged in one step; elsewhere
    the old one is renamed aside for a moment). In any case no temporary directory is left
    after; a full disk raises `DiskFull`, as `atomic_write` does."""

    def make(directory: Path) -> Path:
        return Path(tempfile.mkdtemp(prefix=_prefix(), dir=directory))

    with _atomic(Path(path), make, 0o777, _replace_directory) as tmp:
        yield tmp


@contextmanager
def _atomic(path: Path, make: Callable[[Path], Path], mode: int,
            replace: Callable[[Path, Path], None]) -> Iterator[Path]:
    """The steps of both: `make` a temporary beside `path`, yield it, give it `mode` under
    the umask (mkstemp and mkdtemp make them private), sync it (its data or entries are on
    disk before the name points at it) and `replace` `path` with it; remove it otherwise.
    A `path` that is a symbolic link is written through: its target is replaced, the link
    kept (what reads the target sees the new file)."""
    if path.is_symlink():
        path = Path(os.path.realpath(path))
    make_directory(path.parent, path)
    sweep_stale(path.parent)
    try:
        tmp = make(path.parent)
    except OSError as err:
        raise cannot_write(err, path) from None
    try:
        with signals_raise():
            yield tmp
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(tmp, mode & ~umask)
            _fsync(tmp)
            replace(tmp, path)
    except (OSError, RuntimeError) as err:
        full = _disk_full(err, path)
        if full is not None:
            raise full from err
        raise
    finally:
        if tmp.is_symlink() or tmp.is_file():  # a link: what an exchange with one leaves
            tmp.unlink()
        elif os.path.lexists(tmp):
            shutil.rmtree(tmp, ignore_errors=True)


def write_text(path: Path, text: str) -> None:
    """Write a UTF-8 text file atomically."""
    with atomic_write(Path(path)) as tmp:
        tmp.write_text(text, encoding="utf-8")


def make_directory(directory: Path, target: Optional[Path] = None) -> None:
    """Create `directory` and its parents (where they are missing) to write `target` (by
    default the directory itself) in; a read-only place, a file in the way or a full disk
    is a catalogue error (E009, E024), not an OSError."""
    try:
        Path(directory).mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise cannot_write(err, Path(target or directory)) from None


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


def _replace_directory(new: Path, path: Path) -> None:
    """Put the directory `new` at `path`; an old directory there ends up at `new` (removed
    by the caller) or, where names cannot be exchanged, is removed here."""
    if not os.path.lexists(path) or _is_empty_dir(path):
        os.rename(new, path)  # replaces an empty directory, too
        return
    if not path.is_dir():
        raise ElmoError(Errors.E028.format(path=path, what="it is replaced by a directory"))
    if _exchange(new, path):
        return
    aside = path.with_name(f"{path.name}.old-{os.getpid()}")  # not swept: never lost
    os.rename(path, aside)
    os.rename(new, path)
    shutil.rmtree(aside, ignore_errors=True)


def _is_empty_dir(path: Path) -> bool:
    try:
        return path.is_dir() and not path.is_symlink() and not any(os.scandir(path))
    except OSError:
        return False


_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def _exchange(first: Path, second: Path) -> bool:
    """Swap two paths in one step (Linux renameat2 RENAME_EXCHANGE); False where the
    system or the file system cannot."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return False
    done = renameat2(_AT_FDCWD, os.fsencode(first), _AT_FDCWD, os.fsencode(second),
                     _RENAME_EXCHANGE)
    if done == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):
        return False
    raise OSError(code, os.strerror(code), str(second))


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _prefix() -> str:
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
