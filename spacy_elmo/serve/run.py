"""Run the app under uvicorn until SIGTERM or Ctrl-C, and stop cleanly.

On the first signal the server stops accepting connections, the batcher refuses new
requests (E216, HTTP 503) and runs those already waiting; requests still waiting after
`shutdown_timeout` seconds are refused, never cut off: every request gets a whole answer.
uvicorn then waits for the connections to finish (up to `shutdown_timeout` + 10 s) and ends
the app. A second Ctrl-C stops at once.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
from types import FrameType
from typing import Iterator, Optional

import uvicorn

from ..errors import Warnings
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
            self.batcher.begin_stop(self.grace_s)
        super().handle_exit(sig, frame)

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        previous = {sig: signal.signal(sig, self.handle_exit) for sig in STOP_SIGNALS}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)


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
    server.run()
    if server.stopped_by is not None and batcher.stats["refused"]:
        log.warning(Warnings.W031.format(signal=signal.Signals(server.stopped_by).name,
                                         refused=batcher.stats["refused"],
                                         timeout=settings.shutdown_timeout))
    return server.stopped_by
