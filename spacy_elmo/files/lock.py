"""`DirectoryLock` keeps a second writer out of a directory (a pretraining run): an OS lock
(filelock's flock) on its `.lock` file, which the OS frees however the holder ends."""

from __future__ import annotations

import errno
import json
import os
import socket
import time
from pathlib import Path
from typing import Any, Dict, Optional

from filelock import Timeout, UnixFileLock, unix_has_fcntl

from ..errors import ElmoError, Errors, Warnings, warn
from .names import LOCK_NAME

# a file system without locks: no lock
_NO_LOCKS = (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS)


class DirectoryLock:
    """An exclusive OS lock on `<directory>/.lock`, held from `acquire` to `release` (a
    `with` block): a second process that asks for it is refused (E071, naming the holder's
    process id and host, which the file records). The OS frees the lock however the holder
    ends, also on SIGKILL or a crash: the record it then leaves behind marks the lock as
    stale, and the next holder takes it over with a warning (W017). The file itself stays
    (empty when released): removing it would let two processes lock two different files.
    Where there is no flock (Windows, a file system without locks), there is no lock. The
    directory must exist."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        self.path = self.directory / LOCK_NAME
        self._lock: Optional[UnixFileLock] = None
        self._fd: Optional[int] = None  # the lock's, borrowed while held
        self._stale: Dict[str, Any] = {}

    @property
    def held(self) -> bool:
        return self._lock is not None

    def acquire(self) -> None:
        """Take the lock (a no-op when held): E071 when another process holds it."""
        if self._lock is not None or not unix_has_fcntl:
            return
        lock = UnixFileLock(self.path, blocking=False, thread_local=False,
                            fallback_to_soft=False, preserve_lock_file=True,
                            on_acquired=self._record)
        try:
            lock.acquire()
        except Timeout:
            raise ElmoError(Errors.E071.format(path=self.directory, lock=self.path,
                                               holder=_describe_holder(_read(self.path)))
                            ) from None
        except OSError as err:
            if err.errno in _NO_LOCKS:
                return
            # a read-only directory, or something else at .lock
            fix = (f"'{self.path}' must be a file: remove what is there" if self.path.is_dir()
                   else "the directory must be writable: fix its permissions, or copy it "
                        "somewhere writable")
            raise ElmoError(Errors.E170.format(path=self.directory, lock=self.path,
                                               err=os.strerror(err.errno or 0), fix=fix)
                            ) from None
        self._lock = lock
        if self._stale:
            warn(Warnings.W017.format(lock=self.path, holder=_describe_holder(self._stale)),
                 stacklevel=2)

    def _record(self, fd: int) -> None:
        """Once locked: note a record left by a holder that ended without releasing, and
        write ours."""
        self._fd, self._stale = fd, _parse(os.pread(fd, 4096, 0))
        record = json.dumps({"pid": os.getpid(), "host": socket.gethostname(),
                             "since": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())})
        os.ftruncate(fd, 0)
        os.pwrite(fd, (record + "\n").encode(), 0)

    def release(self) -> None:
        """Free the lock (a no-op when not held); the record is cleared first."""
        lock, fd, self._lock, self._fd = self._lock, self._fd, None, None
        if lock is None:
            return
        try:
            if fd is not None:
                os.ftruncate(fd, 0)
        finally:
            lock.release(force=True)

    def __enter__(self) -> DirectoryLock:
        self.acquire()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.release()


def _read(path: Path) -> Dict[str, Any]:
    """The holder's record in a lock file ({} when empty or unreadable)."""
    try:
        return _parse(path.read_bytes()[:4096])
    except OSError:
        return {}


def _parse(data: bytes) -> Dict[str, Any]:
    try:
        record = json.loads(data.decode("utf-8") or "{}")
    except (UnicodeDecodeError, json.JSONDecodeError):
        return {}
    return record if isinstance(record, dict) else {}


def _describe_holder(record: Dict[str, Any]) -> str:
    if not record:
        return "a process that has not recorded itself yet"
    return (f"process {record.get('pid', '?')} on host {record.get('host', '?')}, "
            f"since {record.get('since', '?')}")
