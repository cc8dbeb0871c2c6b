"""The stop signal's handler never takes the batcher's locks itself: the signal interrupts
the event loop's thread, which may be inside `submit` holding them."""

import asyncio
import signal
import threading
import time

import pytest

pytest.importorskip("fastapi", reason="the serve extra is not installed")
uvicorn = pytest.importorskip("uvicorn", reason="the serve extra is not installed")

from spacy_elmo.serve.batcher import Batcher  # noqa: E402
from spacy_elmo.serve.run import _Server  # noqa: E402


async def _app(scope, receive, send):  # never called
    raise AssertionError


class GuardedLock:
    """The batcher's lock, failing instead of waiting forever when it is taken again."""

    def __init__(self) -> None:
        self._lock = threading.Lock()

    def __enter__(self) -> None:
        assert self._lock.acquire(timeout=2), "the lock was taken while held: a deadlock"

    def __exit__(self, *exc) -> None:
        self._lock.release()


def make_server(batcher: Batcher) -> _Server:
    return _Server(uvicorn.Config(_app), batcher, grace_s=5.0)


def test_a_signal_while_the_loop_holds_the_batcher_lock_does_not_hang():
    batcher = Batcher(lambda kind, payloads: payloads)
    batcher._lock = GuardedLock()  # type: ignore[assignment]
    server = make_server(batcher)

    async def main() -> None:
        with batcher._lock:  # as inside submit() when the signal lands
            started = time.monotonic()
            server.handle_exit(signal.SIGTERM, None)
            assert time.monotonic() - started < 1.0
            assert not batcher.stopping  # not yet: it runs once the handler has returned
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        assert batcher.stopping

    asyncio.run(main())
    assert server.stopped_by == signal.SIGTERM
    assert server.should_exit


def test_a_signal_before_the_loop_runs_stops_the_batcher():
    batcher = Batcher(lambda kind, payloads: payloads)
    server = make_server(batcher)
    server.handle_exit(signal.SIGINT, None)
    deadline = time.monotonic() + 10
    while not batcher.stopping and time.monotonic() < deadline:
        time.sleep(0.01)
    assert batcher.stopping and server.stopped_by == signal.SIGINT
    server.handle_exit(signal.SIGINT, None)  # a second signal: stop at once, keep the first
    assert server.force_exit and server.stopped_by == signal.SIGINT


def test_a_stop_signal_ignored_at_start_stays_ignored():
    """`nohup spacy-elmo serve` or `spacy-elmo serve &` in a script inherits SIGINT ignored:
    the server keeps it so (SIGTERM still stops it), as Python itself does."""
    server = make_server(Batcher(lambda kind, payloads: payloads))
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with server.capture_signals():
            assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
            assert signal.getsignal(signal.SIGTERM) == server.handle_exit
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
        signal.signal(signal.SIGINT, signal.default_int_handler)
        with server.capture_signals():  # not ignored: Ctrl-C stops the server
            assert signal.getsignal(signal.SIGINT) == server.handle_exit
    finally:
        signal.signal(signal.SIGINT, previous)
