"""Run the app under uvicorn until SIGTERM or Ctrl-C, and stop cleanly.

On the first signal the server stops accepting connections, the batcher refuses new
requests (E216, HTTP 503) and runs those already waiting; requests still waiting after
`shutdown_timeout` seconds are refused, never cut off: every request gets a whole answer.
uvicorn then waits for the connections to finish (up to `shutdown_timeout` + 10 s) and ends
the app. A second Ctrl-C stops at once. A stop signal ignored when the server started
(SIGINT under `nohup` or `cmd &` in a script) stays ignored.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import signal
import socket
import threading
from types import FrameType
from typing import Any, Callable, Dict, Iterator, Optional

import uvicorn

from ..errors import ElmoError, Errors, Warnings, warn
from .app import make_app
from .batcher import Batcher
from .connections import FILES_RESERVED, AcceptPaused, Guard, ListeningSocket, protocol_class
from .limits import ServeSettings
from .served import Served

try:
    import resource
except ImportError:  # not on Windows: no file limit to read
    resource = None  # type: ignore[assignment]

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
LISTEN_BACKLOG = 2048  # uvicorn's default
log = logging.getLogger("uvicorn.error")


class _Server(uvicorn.Server):
    """uvicorn's server, telling the batcher when a stop begins; the signal is kept for the
    exit status instead of being raised again once the server has stopped."""

    def __init__(self, config: uvicorn.Config, batcher: Batcher, grace_s: float,
                 guard: Optional[Guard] = None) -> None:
        super().__init__(config)
        self.batcher = batcher
        self.grace_s = grace_s
        self.guard = guard
        self.stopped_by: Optional[int] = None

    def handle_exit(self, sig: int, frame: Optional[FrameType]) -> None:
        if self.stopped_by is None:
            self.stopped_by = sig
            if self.guard is not None:
                self.guard.stopping = True
            self._later(self.batcher.begin_stop, self.grace_s)
        super().handle_exit(sig, frame)

    async def startup(self, sockets: Optional[list] = None) -> None:
        asyncio.get_running_loop().set_exception_handler(_one_line_errors)
        await super().startup(sockets=sockets)
        if self.started:  # uvicorn says it only for sockets it made itself
            for sock in sockets or []:
                host, port = sock.getsockname()[:2]
                shown = f"[{host}]" if ":" in host else host
                log.info("Uvicorn running on http://%s:%d (Press CTRL+C to quit)", shown, port)

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
    before the model loads, the way `bind` binds just after."""
    bind(host, port).close()


def bind(host: str, port: int) -> socket.socket:
    """A socket bound to host:port and listening (E272 when it cannot be); uvicorn serves
    on it, and says so once it does."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(LISTEN_BACKLOG)
    except OSError as err:
        sock.close()
        raise ElmoError(Errors.E272.format(host=host, port=port,
                                           err=err.strerror or str(err))) from err
    return sock


def _one_line_errors(loop: asyncio.AbstractEventLoop, context: Dict[str, Any]) -> None:
    """The event loop's errors in one log line: accept() out of files (EMFILE, ENFILE,
    ENOBUFS: asyncio retries a second later) or a connection's socket error need no
    traceback; anything else keeps the default report."""
    err = context.get("exception")
    if isinstance(err, AcceptPaused):  # logged once a second by the socket itself (W041)
        return
    if isinstance(err, OSError):
        log.error("%s: %s", context.get("message", "socket error"), err.strerror or err)
        return
    loop.default_exception_handler(context)


def connection_limit(asked: int) -> int:
    """--max-connections, lowered to what the process's file limit (raised to its hard limit
    first) leaves beside FILES_RESERVED (W040)."""
    if resource is None:
        return asked
    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if hard == resource.RLIM_INFINITY or hard > soft:
            target = hard if hard != resource.RLIM_INFINITY else max(soft, 65536)
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
    except (ValueError, OSError):
        return asked
    allowed = max(1, soft - FILES_RESERVED)
    if asked > allowed:
        warn(Warnings.W040.format(asked=asked, allowed=allowed, files=soft,
                                  reserve=FILES_RESERVED))
        return allowed
    return asked


def serve(served: Served, settings: ServeSettings, *, threads: Optional[int] = None
          ) -> Optional[int]:
    """Serve until stopped; the number of the signal that stopped the server (None when it
    stopped otherwise)."""
    connections = dataclasses.replace(
        settings.connections,
        max_connections=connection_limit(settings.connections.max_connections))
    settings = dataclasses.replace(settings, connections=connections)
    app = make_app(served, settings, threads=threads)
    batcher: Batcher = app.state.elmo.batcher
    guard: Guard = app.state.elmo.guard
    config = uvicorn.Config(app, host=settings.host, port=settings.port,
                            log_level=settings.log_level, access_log=settings.access_log,
                            timeout_graceful_shutdown=int(settings.shutdown_timeout) + 10,
                            # seconds for call_later: a float works as well as an int
                            timeout_keep_alive=connections.keep_alive_timeout,  # type: ignore[arg-type]
                            http=protocol_class(guard), lifespan="on", server_header=False)
    server = _Server(config, batcher, settings.shutdown_timeout, guard)
    try:
        server.run(sockets=[ListeningSocket.take(bind(settings.host, settings.port), guard)])
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
