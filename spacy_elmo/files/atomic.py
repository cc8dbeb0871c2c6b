"""Files: the path type, reading a JSON object, and writing so that a failure never leaves
a half-written file, nor a temporary one.

Every file spacy-elmo writes goes through `atomic_write`: a temporary file beside the target,
renamed over it when complete, removed on every other path: an exception, Ctrl-C, SIGTERM or
SIGHUP (turned into `Terminated` while the write runs, when no handler of the program's own
is installed), and a full disk (reported as such). A process killed with SIGKILL cannot clean
up: its temporary files carry the host and process id, and the next write into the same
directory removes those whose process is gone. `atomic_directory` does the same for a
directory of files (an export, a snapshot).

`DirectoryLock` keeps a second writer out of a directory (a pretraining run): an OS lock on
its `.lock` file, which the OS frees however the holder ends.
"""

from __future__ import annotations

import ctypes
import errno
import hashlib
import io
import json
import os
import re
import shutil
import signal
import socket
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Dict, Iterable, Iterator, Optional, Union

import h5py

from .errors import ElmoError, Errors, Warnings, damaged, warn

PathLike = Union[str, "os.PathLike[str]"]
TMP_PREFIX = ".tmp-"
_HOST = hashlib.sha1(socket.gethostname().encode()).hexdigest()[:8]
_TMP_NAME = re.compile(r"\.tmp-([0-9a-f]{8})-(\d+)-")
_FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT)


class Terminated(SystemExit):
    """SIGTERM/SIGHUP arrived during a write; the exit status is 128 + the signal number."""

    def __init__(self, signum: int) -> None:
        super().__init__(128 + signum)
        self.signum = signum


class DiskFull(ElmoError):
    """A write failed because the disk (or the user's quota) is full."""


@contextmanager
def atomic_write(path: Path, suffix: str = "") -> Iterator[Path]:
    """Yield a temporary path beside `path`; when the block succeeds it replaces `path`
    (with the mode a new file gets under the umask), and in any case it is gone after.
    A full disk raises `DiskFull`; other errors pass through."""
    path = Path(path)
    make_directory(path.parent, path)
    sweep_stale(path.parent)
    try:
        fd, name = tempfile.mkstemp(prefix=f"{TMP_PREFIX}{_HOST}-{os.getpid()}-",
                                    suffix=suffix, dir=path.parent)
    except OSError as err:
        raise _cannot_write(err, path) from None
    os.close(fd)
    tmp = Path(name)
    try:
        with _signals_raise():
            yield tmp
            _make_public(tmp, 0o666)  # mkstemp made it private
            _fsync(tmp)  # the data is on disk before the name points at it
            os.replace(tmp, path)
    except (OSError, RuntimeError) as err:
        _raise_if_full(err, path)
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
        tmp = Path(tempfile.mkdtemp(prefix=f"{TMP_PREFIX}{_HOST}-{os.getpid()}-",
                                    dir=path.parent))
    except OSError as err:
        raise _cannot_write(err, path) from None
    try:
        with _signals_raise():
            yield tmp
            _make_public(tmp, 0o777)  # mkdtemp made it private
            _fsync(tmp)  # its entries are on disk before the name points at it
            _replace_directory(tmp, path)
    except (OSError, RuntimeError) as err:
        _raise_if_full(err, path)
        raise
    finally:
        if tmp.is_symlink():  # what an exchange with a link to a directory leaves
            tmp.unlink()
        elif os.path.lexists(tmp):
            shutil.rmtree(tmp, ignore_errors=True)


def make_directory(directory: Path, target: Optional[Path] = None) -> None:
    """Create `directory` and its parents (where they are missing) to write `target` (by
    default the directory itself) in; a read-only place, a file in the way or a full disk
    is a catalogue error (E009, E024), not an OSError."""
    try:
        Path(directory).mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise _cannot_write(err, Path(target or directory)) from None


def _cannot_write(err: OSError, path: Path) -> ElmoError:
    """The catalogue error for an OSError met while starting to write `path`: E024 for a
    full disk, else E009 with the reason (a read-only file system, no permission)."""
    full = _disk_full(err, path)
    if full is not None:
        return full
    name = str(err.filename or "")
    where = (f" ('{name}')" if name and name != str(path) and not is_temporary(Path(name).name)
             else "")
    return ElmoError(Errors.E009.format(path=path, err=f"{os.strerror(err.errno or 0)}{where}"))


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


def write_text(path: Path, text: str) -> None:
    """Write a UTF-8 text file atomically."""
    with atomic_write(Path(path)) as tmp:
        tmp.write_text(text, encoding="utf-8")


def write_json(path: Path, data: Any) -> None:
    """Write `data` as indented JSON (a final newline), atomically."""
    write_text(path, json.dumps(data, indent=2) + "\n")


def check_writable_path(path: Path, what: str) -> None:
    """Raise E009 before any work when `path` can never be written: it is a directory, or
    a file stands where one of its parent directories would be."""
    if path.is_dir():
        raise ElmoError(Errors.E009.format(path=path, err=f"it is a directory; give {what}"))
    for parent in path.parents:
        if parent.exists():
            if not parent.is_dir():
                raise ElmoError(Errors.E009.format(path=path,
                                                   err=f"'{parent}' is a file, not a directory"))
            return


STDOUT = "-"
# the file that marks a pretraining run directory (pretrain.checkpoint and bilm.sources
# take the name from here): the guard protects a whole run when an input lies in it
RUN_CHECKPOINT = "checkpoint.pt"


def guard_output(output: PathLike, *, inputs: Iterable[PathLike] = (), overwrite: bool = False,
                 what: str = "OUTPUT", stdout_ok: bool = False) -> Optional[Path]:
    """The one check before a command writes a file. Returns the path to write, or None for
    standard output ('-', where `stdout_ok`; else E070). Refuses, before any work: an output
    that is one of `inputs` by any name (same device and inode: hard and symbolic links) or
    lies inside an input directory (a model), or inside the pretraining run an input lies in
    (RUN/model, a snapshot, RUN/checkpoint.pt: the whole run), even with `overwrite` (E025);
    an output inside any run or export, or over a biLM's weights or options (E073, E167);
    a directory, or a path whose parent is a file (E009); an existing file, or a link to
    none, unless `overwrite` (E026)."""
    if str(output) == STDOUT:
        if stdout_ok:
            return None
        raise ElmoError(Errors.E070.format(what=what))
    path = Path(output)
    target = _stat_or_none(path)
    resolved = path.resolve()
    inputs = list(inputs)
    inputs += [run for source in inputs if (run := enclosing_run(Path(source))) is not None]
    _refuse_model_or_run(path)
    for source in inputs:
        source_path = Path(source)
        source_stat = _stat_or_none(source_path)
        if source_stat is None:
            continue
        if target is not None and (target.st_dev, target.st_ino) == (source_stat.st_dev,
                                                                     source_stat.st_ino):
            raise ElmoError(Errors.E025.format(output=output, input=source))
        inside = source_path.is_dir() and resolved.is_relative_to(source_path.resolve())
        if str(source) != STDOUT and inside:
            raise ElmoError(Errors.E025.format(output=output, input=source))
    check_writable_path(path, f"a file name for {what}")
    if (target is not None or path.is_symlink()) and not overwrite:
        raise ElmoError(Errors.E026.format(output=output))
    return path


# the files of a biLM in the published layout: a directory holding both is a model
MODEL_FILES = ("weights.hdf5", "options.json")
# what `spacy-elmo export` writes beside them (pretrain.export's SOFTMAX_NAME): an export
EXPORT_MARK = "softmax.hdf5"


def _refuse_model_or_run(path: Path) -> None:
    """E073 for an output inside a pretraining run (only `pretrain` and `export` write
    there, under the run's lock) or inside an exported biLM (weights.hdf5, options.json and
    softmax.hdf5: an export is replaced whole); E167 for one that would replace the
    weights.hdf5 or options.json of a biLM. Other files beside a biLM's two (the folder
    a downloaded biLM is kept in) may be written."""
    run = enclosing_run(path)
    if run is not None:
        raise ElmoError(Errors.E073.format(output=path, what="the pretraining run", where=run))
    parent = path.resolve().parent
    if all((parent / name).is_file() for name in MODEL_FILES):
        if (parent / EXPORT_MARK).is_file():
            raise ElmoError(Errors.E073.format(output=path, what="the exported biLM",
                                               where=parent))
        if path.name in MODEL_FILES:
            raise ElmoError(Errors.E167.format(output=path, name=path.name, where=parent))


def model_or_run(directory: Path) -> Optional[str]:
    """What `directory` is when its files are a model's or a run's, never text to read: "a
    pretraining run" (its checkpoint; from its start, its lock beside its config.json or
    vocab.txt) or "a biLM directory" (weights.hdf5: an export, a snapshot, a published
    biLM); None for any other directory."""
    if (directory / RUN_CHECKPOINT).is_file() or ((directory / LOCK_NAME).is_file() and any(
            (directory / name).is_file() for name in ("config.json", "vocab.txt"))):
        return "a pretraining run"
    if (directory / MODEL_FILES[0]).is_file():
        return "a biLM directory"
    return None


def enclosing_run(path: Path) -> Optional[Path]:
    """The pretraining run directory `path` is, or lies in (up to 3 levels: RUN/model,
    RUN/snapshots/step_N/weights.hdf5), if any."""
    if str(path) == STDOUT:
        return None
    candidates = [path.resolve(), *list(path.resolve().parents)[:3]]
    return next((d for d in candidates if (d / RUN_CHECKPOINT).is_file()), None)


def _stat_or_none(path: Path) -> Optional[os.stat_result]:
    """The file's status ('-' is standard input), or None where there is none."""
    try:
        return os.fstat(sys.stdin.fileno()) if str(path) == STDOUT else path.stat()
    except (OSError, ValueError, io.UnsupportedOperation):
        return None


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


@contextmanager
def _signals_raise() -> Iterator[None]:
    """While the block runs, SIGTERM and SIGHUP raise `Terminated` instead of killing the
    process at once, so that cleanup runs; only where they would kill it (the default
    handler, main thread). A program's own handlers are left alone."""
    previous = {}
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, getattr(signal, "SIGHUP", None)):
            if sig is not None and signal.getsignal(sig) == signal.SIG_DFL:
                previous[sig] = signal.signal(sig, _raise_terminated)
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _raise_terminated(signum: int, frame: Any) -> None:
    raise Terminated(signum)


def _make_public(tmp: Path, mode: int) -> None:
    """Give `tmp` the permissions a new file (0o666) or directory (0o777) gets under the
    umask."""
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, mode & ~umask)


def _raise_if_full(err: BaseException, path: Path) -> None:
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


class _GuardedFile(io.RawIOBase):
    """A file for h5py that never lets a failed write reach HDF5.

    HDF5 does not recover from a failed write (on a full disk it crashed the process in
    `close`). Here the first error is kept and later writes are dropped, so that HDF5 can
    close cleanly; `raise_error` then raises it (the file is removed by `atomic_write`)."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        self._file = open(path, "w+b", buffering=0)
        self.error: Optional[OSError] = None

    def readable(self) -> bool:
        return True

    def writable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        return self._file.seek(offset, whence)

    def tell(self) -> int:
        return self._file.tell()

    def readinto(self, buffer: Any) -> int:
        return self._file.readinto(buffer) or 0

    def write(self, data: Any) -> int:
        view = memoryview(data).cast("B")
        done = 0
        if self.error is None:
            try:
                while done < len(view):
                    written = self._file.write(view[done:])
                    if not written:
                        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
                    done += written
            except OSError as err:
                self.error = err
        if done < len(view):  # keep HDF5's idea of the file position
            self._file.seek(len(view) - done, io.SEEK_CUR)
        return len(view)

    def truncate(self, size: Optional[int] = None) -> int:
        try:
            return self._file.truncate(size)
        except OSError as err:
            self.error = self.error or err
            return self._file.tell() if size is None else size

    def flush(self) -> None:
        pass

    def close(self) -> None:
        if not self._file.closed:
            self._file.close()
        super().close()

    def raise_error(self) -> None:
        if self.error is not None:
            raise self.error


class HDF5Writer:
    """`with HDF5Writer(tmp) as out:` gives `out.file`, an h5py.File writing to `tmp`;
    `out.check()` raises the first write error (call it between datasets), and leaving the
    block raises it too, after HDF5 has closed the file."""

    def __init__(self, path: Path) -> None:
        self._raw = _GuardedFile(path)
        try:
            self.file = h5py.File(self._raw, "w")
        except BaseException:
            self._raw.close()
            raise

    def check(self) -> None:
        self._raw.raise_error()

    def __enter__(self) -> HDF5Writer:
        return self

    def __exit__(self, *exc: Any) -> None:
        try:
            self.file.close()
        finally:
            self._raw.close()
        if exc[0] is None:
            self.check()


LOCK_NAME = ".lock"


class DirectoryLock:
    """An exclusive OS lock (flock) on `<directory>/.lock`, held from `acquire` to
    `release` (a `with` block): a second process that asks for it is refused (E071, naming
    the holder's process id and host, which the file records). The OS frees the lock
    however the holder ends, also on SIGKILL or a crash: the record it then leaves behind
    marks the lock as stale, and the next holder takes it over with a warning (W017).
    The file itself stays (empty when released): removing it would let two processes lock
    two different files. Where there is no flock (Windows, a file system without locks),
    there is no lock."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        self.path = self.directory / LOCK_NAME
        self._fd: Optional[int] = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> None:
        """Take the lock (a no-op when held): E071 when another process holds it."""
        if self._fd is not None:
            return
        try:
            import fcntl
        except ImportError:  # no flock (Windows): no lock
            return
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
        except OSError as err:  # a read-only directory, or something else at .lock
            fix = (f"'{self.path}' must be a file: remove what is there" if self.path.is_dir()
                   else "the directory must be writable: fix its permissions, or copy it "
                        "somewhere writable")
            raise ElmoError(Errors.E170.format(path=self.directory, lock=self.path,
                                               err=os.strerror(err.errno or 0), fix=fix)
                            ) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as err:
            holder = _describe_holder(_read_record(fd))
            os.close(fd)
            if err.errno in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS):
                return  # a file system without locks: no lock
            if err.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise
            raise ElmoError(Errors.E071.format(path=self.directory, holder=holder,
                                               lock=self.path)) from None
        stale = _read_record(fd)
        if stale:
            warn(Warnings.W017.format(lock=self.path, holder=_describe_holder(stale)), stacklevel=2)
        record = json.dumps({"pid": os.getpid(), "host": socket.gethostname(),
                             "since": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())})
        os.ftruncate(fd, 0)
        os.pwrite(fd, (record + "\n").encode(), 0)
        self._fd = fd

    def release(self) -> None:
        """Free the lock (a no-op when not held); the record is cleared first."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            os.ftruncate(fd, 0)
        finally:
            os.close(fd)  # frees the flock

    def __enter__(self) -> DirectoryLock:
        self.acquire()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.release()


def _read_record(fd: int) -> Dict[str, Any]:
    """The holder's record in a lock file ({} when empty or unreadable)."""
    try:
        data = json.loads(os.pread(fd, 4096, 0).decode("utf-8") or "{}")
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return {}
    return data if isinstance(data, dict) else {}


def _describe_holder(record: Dict[str, Any]) -> str:
    if not record:
        return "a process that has not recorded itself yet"
    return (f"process {record.get('pid', '?')} on host {record.get('host', '?')}, "
            f"since {record.get('since', '?')}")
