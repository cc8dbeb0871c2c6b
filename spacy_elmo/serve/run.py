"""Run the app under uvicorn until SIGTERM or Ctrl-C, and stop cleanly.

On the first signal the server stops accepting connections, the batcher refuses new
requests (E216, HTTP 503) and runs those already waiting; requests still waiting after
`shutdown_timeout` seconds are refused, never cut off: every request gets a whole answer.
uvicorn then waits for the connections to finish (up to `shutdown_timeout` + 10 s) and ends
the app. A second Ctrl-C stops at once. A stop signal ignored when the server started (SIGINT under
`nohup` or `cmd &` in a script) stays ignored.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import socket
import threading
from types import FrameType
from typing import Callable, Iterator, Optional

import uvicorn

from ..errors import ElmoError, Errors, Warnings
from .app import make_app
from .batcher import Batcher
from .served import Served
from .settings import ServeSettings

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
log = logging.getLogger("uvicorn.error")


class _Server(uvicorn.Server):
    """uvicorn's server, telling the batcher when a stop begins; the signal is kept for the
    exit status instead of being raised again once the server has stopped."""

    def __init__(self, config: uvicorn.Config, batcher: Batcher, grace_s: float) -> None:
        super().__init__(config)
        self.batcher = batcher
        self.grace_s = grace_s
        self.stopped_by: Optional[int] = None

    def handle_exit(self, sig: int, frame: Optional[FrameType]) -> None:
        if self.stopped_by is None:
            self.stopped_by = sig
            self._later(self.batcher.begin_stop, self.grace_s)
        super().handle_exit(sig, frame)

    @staticmethod
    def _later(call: Callable[[float], None], grace_s: float) -> None:
        """Run `call` outside the signal handler: the handler interrupts the event loop's
        thread, which may hold the batcher's locks (a request being queued), so taking them
        here could wait forever. On the loop it runs as soon as the handler returns; before
        the loop runs, in a thread of its own."""
        try:
            asyncio.get_running_loop().call_soon_threadsafe(call, grace_s)
        except RuntimeError:  # no loop running in this thread
            threading.Thread(target=call, args=(grace_s,), daemon=True).start()

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        # a signal ignored when the process started stays ignored (`nohup`, `cmd &` in a
        # script), as the Unix convention and Python's own SIGINT handling have it
        previous = {sig: signal.signal(sig, self.handle_exit) for sig in STOP_SIGNALS
                    if signal.getsignal(sig) is not signal.SIG_IGN}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)


def check_listen(host: str, port: int) -> None:
    """E272 unless a server could listen on host:port now (port 0: any free one), checked
    before the model loads; uvicorn binds the same way (SO_REUSEADDR), just after."""
    try:
        found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        for family, kind, proto, _, address in found:
            with socket.socket(family, kind, proto) as sock:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                sock.bind(address)
    except OSError as err:  # socket.gaierror included
        raise ElmoError(Errors.E272.format(host=host, port=port,
                                           err=err.strerror or str(err))) from err


def serve(served: Served, settings: ServeSettings, *, threads: Optional[int] = None
          ) -> Optional[int]:
    """Serve until stopped; the number of the signal that stopped the server (None when it
    stopped otherwise)."""
    app = make_app(served, settings, threads=threads)
    batcher: Batcher = app.state.elmo.batcher
    config = uvicorn.Config(app, host=settings.host, port=settings.port,
                            log_level=settings.log_level, access_log=settings.access_log,
                            timeout_graceful_shutdown=int(settings.shutdown_timeout) + 10,
                            lifespan="on", server_header=False)
    server = _Server(config, batcher, settings.shutdown_timeout)
    try:
        server.run()
    except SystemExit as err:  # uvicorn could not start (it logged why)
        if server.started:
            raise
        raise ElmoError(Errors.E272.format(host=settings.host, port=settings.port,
                                           err="the server did not start (see the error "
                                               "above)")) from err
    if server.stopped_by is not None and batcher.stats["refused"]:
        log.warning(Warnings.W031.format(signal=signal.Signals(server.stopped_by).name,
                                         refused=batcher.stats["refused"],
                                         timeout=settings.shutdown_timeout))
    return server.stopped_by
