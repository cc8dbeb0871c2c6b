"""Writing a file or a directory whole or not at all: a temporary one beside the target,
renamed over it when complete and removed on every other path (an exception, Ctrl-C, SIGTERM
or SIGHUP: `signals`, a full disk: `disk_full`). Every file spacy-elmo writes goes through
`atomic_write`; a directory (an export, a snapshot) through `atomic_directory`."""

from __future__ import annotations

import ctypes
import errno
import os
import shutil
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Optional

from ..errors import ElmoError, Errors
from .disk_full import cannot_write, raise_if_full
from .signals import signals_raise
from .temporary import sweep_stale, temporary_prefix


@contextmanager
def atomic_write(path: Path, suffix: str = "") -> Iterator[Path]:
    """Yield a temporary path beside `path`; when the block succeeds it replaces `path`
    (with the mode a new file gets under the umask), and in any case it is gone after.
    A full disk raises `DiskFull`; other errors pass through."""
    path = Path(path)
    make_directory(path.parent, path)
    sweep_stale(path.parent)
    try:
        fd, name = tempfile.mkstemp(prefix=temporary_prefix(), suffix=suffix, dir=path.parent)
    except OSError as err:
        raise cannot_write(err, path) from None
    os.close(fd)
    tmp = Path(name)
    try:
        with signals_raise():
            yield tmp
            _make_public(tmp, 0o666)  # mkstemp made it private
            _fsync(tmp)  # the data is on disk before the name points at it
            os.replace(tmp, path)
    except (OSError, RuntimeError) as err:
        raise_if_full(err, path)
        raise
    finally:
        if os.path.lexists(tmp):
            os.unlink(tmp)


@contextmanager
def atomic_directory(path: Path) -> Iterator[Path]:
    """Yield a new, empty temporary directory beside `path`; when the block succeeds it
    takes the place of `path`. A directory already there is replaced as a whole, and kept
    until the new one is complete (on Linux the two are exchanged in one step; elsewhere
    the old one is renamed aside for a moment). In any case no temporary directory is left
    after; a full disk raises `DiskFull`, as `atomic_write` does."""
    path = Path(path)
    make_directory(path.parent, path)
    sweep_stale(path.parent)
    try:
        tmp = Path(tempfile.mkdtemp(prefix=temporary_prefix(), dir=path.parent))
    except OSError as err:
        raise cannot_write(err, path) from None
    try:
        with signals_raise():
            yield tmp
            _make_public(tmp, 0o777)  # mkdtemp made it private
            _fsync(tmp)  # its entries are on disk before the name points at it
            _replace_directory(tmp, path)
    except (OSError, RuntimeError) as err:
        raise_if_full(err, path)
        raise
    finally:
        if tmp.is_symlink():  # what an exchange with a link to a directory leaves
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


def _make_public(tmp: Path, mode: int) -> None:
    """Give `tmp` the permissions a new file (0o666) or directory (0o777) gets under the
    umask."""
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, mode & ~umask)
