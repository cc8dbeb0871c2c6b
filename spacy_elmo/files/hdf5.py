"""Writing HDF5 through h5py so that a failed write (a full disk) is raised as an error
after HDF5 has closed the file, never met by HDF5 itself."""

from __future__ import annotations

import errno
import io
import os
from pathlib import Path
from typing import Any, Optional

import h5py


class _GuardedFile(io.FileIO):
    """A file for h5py that never lets a failed write reach HDF5.

    HDF5 does not recover from a failed write (on a full disk it crashed the process in
    `close`). Here the first error is kept and later writes are dropped, so that HDF5 can
    close cleanly; `raise_error` then raises it (the file is removed by `atomic_write`)."""

    def __init__(self, path: Path) -> None:
        super().__init__(path, "w+")
        self.error: Optional[OSError] = None

    def write(self, data: Any) -> int:
        view = memoryview(data).cast("B")
        done = 0
        if self.error is None:
            try:
                while done < len(view):
                    written = super().write(view[done:])
                    if not written:
                        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
                    done += written
            except OSError as err:
                self.error = err
        if done < len(view):  # keep HDF5's idea of the file position
            self.seek(len(view) - done, io.SEEK_CUR)
        return len(view)

    def truncate(self, size: Optional[int] = None) -> int:
        try:
            return super().truncate(size)
        except OSError as err:
            self.error = self.error or err
            return self.tell() if size is None else size

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
