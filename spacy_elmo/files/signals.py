"""SIGTERM and SIGHUP turned into an exception (`Terminated`) while a write runs, so that
its cleanup runs instead of the process dying at once."""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from typing import Any, Iterator


class Terminated(SystemExit):
    """SIGTERM/SIGHUP arrived during a write; the exit status is 128 + the signal number."""

    def __init__(self, signum: int) -> None:
        super().__init__(128 + signum)
        self.signum = signum


@contextmanager
def signals_raise() -> Iterator[None]:
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
