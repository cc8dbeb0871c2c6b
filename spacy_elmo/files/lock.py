"""`DirectoryLock` keeps a second writer out of a directory (a pretraining run): an OS lock
on its `.lock` file, which the OS frees however the holder ends."""

from __future__ import annotations

import errno
import json
import os
import socket
import time
from pathlib import Path
from typing import Any, Dict, Optional

from ..errors import ElmoError, Errors, Warnings, warn
from .names import LOCK_NAME


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
