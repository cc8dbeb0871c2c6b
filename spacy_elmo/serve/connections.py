"""What a client can hold of the server: connections, time, and answers it does not read.

uvicorn's HTTP/1.1 protocol (h11), with the guards a server facing real clients needs:

- at most `max_connections` open: one more gets a 503 (E281) and is closed, with one log
  line a second however many are refused (W033); past REFUSED_LINGERING refusals at once,
  the server accepts nothing for a second (W041): clients wait in the listen queue, and
  the process never runs out of files;
- a request's headers within `header_timeout` of the connection's start or its previous
  answer: an idle or half-sent connection (slowloris) is closed, a half-sent one with 408;
- an answer the client reads nothing of for `send_timeout` seconds is dropped with its
  connection (W034), so a client that never reads cannot pin its answer in memory;
- a close while the client is still sending its body (413, 408) lingers, as nginx's
  lingering close does: the server stops writing, reads and drops what still comes for a
  few seconds, then closes, so that the client reads the refusal instead of a reset;
- on a stop, connections waiting between requests stay open for the keep-alive time, so a
  request that comes meanwhile gets 503 (E216) with `Connection: close`, never a reset.
"""

from __future__ import annotations

import asyncio
import errno
import json
import logging
import socket
import time
from typing import Any, Dict, Optional, Tuple

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from ..errors import Errors, Warnings
from .inputs import ClientError
from .limits import Connections

log = logging.getLogger("uvicorn.error")
LINGER_S = 5.0  # how long a lingering close reads and drops what the client still sends
LINGER_BYTES = 64 << 20  # and at most this much of it
LOG_EVERY_S = 1.0  # one log line a second at most for refusals and send timeouts
# refused connections past the limit that linger at once; more are closed as soon as their
# 503 is written (a flood cannot hold more than this many files beyond the limit)
REFUSED_LINGERING = 32
# files a server keeps beyond its connections: the model's, the log's, and refusals
# lingering or being closed (past them, the server accepts nothing for a second)
FILES_RESERVED = 64 + REFUSED_LINGERING


class Guard:
    """What a server's connections share: their settings, the counts the metrics and log
    report, how many sockets are open, and whether the server is stopping."""

    def __init__(self, settings: Connections) -> None:
        self.settings = settings
        self.stopping = False
        self.open = 0  # sockets accepted and not yet closed, refused ones included
        self.counts: Dict[str, int] = {"refused": 0, "header_timeouts": 0,
                                       "send_timeouts": 0, "lingering_closes": 0,
                                       "accept_pauses": 0}
        self._pending: Dict[str, int] = {}
        self._last_log: Dict[str, float] = {}

    def count(self, what: str, message: Optional[str] = None, **fields: Any) -> None:
        """Count an event; log `message` (a catalogue text formatted with `fields`, `n` and
        `seconds`) at most once every LOG_EVERY_S seconds, with the events since."""
        self.counts[what] += 1
        if message is None:
            return
        self._pending[what] = self._pending.get(what, 0) + 1
        now = time.monotonic()
        last = self._last_log.get(what)
        if last is None or now - last >= LOG_EVERY_S:
            seconds = LOG_EVERY_S if last is None else now - last
            log.warning(message.format(n=self._pending[what], seconds=round(seconds, 1),
                                       **fields))
            self._pending[what] = 0
            self._last_log[what] = now


class AcceptPaused(OSError):
    """Raised by ListeningSocket.accept past the sockets a server may hold: asyncio's accept
    loop then stops for a second (as for EMFILE), and new clients wait in the listen queue."""


class ListeningSocket(socket.socket):
    """The server's listening socket, accepting only while `guard` has room for the refusals
    (--max-connections and REFUSED_LINGERING more), so that a flood of connections never
    takes the process's last files."""

    guard: Guard

    @classmethod
    def take(cls, sock: socket.socket, guard: Guard) -> ListeningSocket:
        """`sock` (bound) as a ListeningSocket; `sock` itself is given up."""
        listening = cls(sock.family, sock.type, sock.proto, fileno=sock.detach())
        listening.guard = guard
        return listening

    paused_at = float("-inf")

    def accept(self) -> Tuple[socket.socket, Any]:
        guard = self.guard
        if guard.open >= guard.settings.max_connections + REFUSED_LINGERING:
            # asyncio tries again at once up to its backlog, then pauses: count one pause
            now = time.monotonic()
            if now - self.paused_at > 0.5:
                self.paused_at = now
                guard.count("accept_pauses", Warnings.W041, open=guard.open,
                            limit=guard.settings.max_connections)
            raise AcceptPaused(errno.EMFILE, "connection limit reached")
        conn, address = super().accept()
        guard.open += 1
        return conn, address


def protocol_class(guard: Guard) -> type:
    """The HTTP protocol for uvicorn's `http` setting, guarded by `guard`."""
    return type("GuardedH11Protocol", (GuardedH11Protocol,), {"guard": guard})


def _raw_response(err: ClientError, reason: str) -> bytes:
    """`err`'s whole HTTP/1.1 answer, as the app gives it (JSON, its headers, and
    `Connection: close`), written before or instead of h11's own (h11 cannot answer a
    request it has not read)."""
    body = json.dumps(err.body(), ensure_ascii=False).encode("utf-8")
    head = f"HTTP/1.1 {err.status} {reason}\r\ncontent-type: application/json\r\n"
    head += f"content-length: {len(body)}\r\n"
    head += "".join(f"{name.lower()}: {value}\r\n" for name, value in err.headers().items())
    return head.encode("ascii") + b"\r\n" + body


class _Transport:
    """The connection's transport, whose `close` lingers while the client still sends (see
    GuardedH11Protocol.close_softly); everything else is the transport's own."""

    def __init__(self, transport: asyncio.Transport, protocol: GuardedH11Protocol) -> None:
        self._transport = transport
        self._protocol = protocol

    def close(self) -> None:
        self._protocol.close_softly()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class GuardedH11Protocol(H11Protocol):
    guard: Guard

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self.real_transport = transport
        self._timer: Optional[asyncio.TimerHandle] = None
        self._send_timer: Optional[asyncio.TimerHandle] = None
        self._lingering = False
        self._lingered = 0
        self._seen_cycle: Any = None
        self._got_bytes = False
        super().connection_made(_Transport(transport, self))  # type: ignore[arg-type]
        settings = self.guard.settings
        over = len(self.connections) - settings.max_connections
        if over > 0:
            self.guard.count("refused", Warnings.W033, open=len(self.connections) - 1,
                             limit=settings.max_connections)
            self.refuse(ClientError(Errors.E281.format(
                open=len(self.connections) - 1, limit=settings.max_connections), 503,
                close=True), "Service Unavailable", linger=over <= REFUSED_LINGERING)
            return
        self._arm(settings.header_timeout, self._headers_late)

    # timers ---------------------------------------------------------------------------
    def _arm(self, seconds: float, callback: Any) -> None:
        self._disarm()
        self._timer = self.loop.call_later(seconds, callback)

    def _disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _headers_late(self) -> None:
        """No whole request line and headers in time: close (408 when some came)."""
        self._timer = None
        if self.real_transport.is_closing():
            return
        self.guard.count("header_timeouts")
        if self._got_bytes:
            self.refuse(ClientError(Errors.E282.format(
                what="headers", seconds=self.guard.settings.header_timeout,
                flag="--header-timeout"), 408, close=True), "Request Timeout")
        else:
            self.real_transport.close()

    # uvicorn's protocol, extended -----------------------------------------------------
    def data_received(self, data: bytes) -> None:
        if self._lingering:
            self._lingered += len(data)
            if self._lingered > LINGER_BYTES:
                self.real_transport.close()
            return
        self._got_bytes = True
        super().data_received(data)

    def handle_events(self) -> None:
        super().handle_events()
        if self.cycle is not None and self.cycle is not self._seen_cycle:
            self._seen_cycle = self.cycle  # a request's headers came: its time runs in the app
            self._disarm()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.real_transport.is_closing() and not self._lingering:
            self._got_bytes = False
            self._arm(self.guard.settings.header_timeout, self._headers_late)
        if self.guard.stopping and not self.real_transport.is_closing():
            self.shutdown()

    def eof_received(self) -> None:
        if self._lingering:
            self.real_transport.close()

    def connection_lost(self, exc: Optional[Exception]) -> None:
        self.guard.open = max(0, self.guard.open - 1)
        self._disarm()
        if self._send_timer is not None:
            self._send_timer.cancel()
        super().connection_lost(exc)

    def pause_writing(self) -> None:
        """The client stopped reading (the send buffer is full): it has `send_timeout`
        seconds to read some of it."""
        super().pause_writing()
        if self._send_timer is None:
            self._send_timer = self.loop.call_later(self.guard.settings.send_timeout,
                                                    self._send_late)

    def resume_writing(self) -> None:
        super().resume_writing()
        if self._send_timer is not None:
            self._send_timer.cancel()
            self._send_timer = None

    def _send_late(self) -> None:
        self._send_timer = None
        self.guard.count("send_timeouts", Warnings.W034,
                         timeout=self.guard.settings.send_timeout)
        self.real_transport.abort()  # drops what is buffered for the client

    def shutdown(self) -> None:
        """The server stops: a connection between requests stays open for the keep-alive
        time, so that a request sent meanwhile gets its 503 (the app refuses it, with
        `Connection: close`) instead of a reset; one in a request closes after its answer."""
        if self.cycle is None or self.cycle.response_complete:
            if self._lingering or self.real_transport.is_closing():
                return
            self._unset_keepalive_if_required()
            self._arm(self.guard.settings.keep_alive_timeout, self.real_transport.close)
        else:
            self.cycle.keep_alive = False

    # closing --------------------------------------------------------------------------
    def refuse(self, err: ClientError, reason: str, *, linger: bool = True) -> None:
        """Answer `err` before (or instead of) reading a request, and close (lingering,
        unless `linger` is False)."""
        self._disarm()
        self.real_transport.write(_raw_response(err, reason))
        if linger:
            self._linger()
        else:
            self.real_transport.close()

    def close_softly(self) -> None:
        """Close; while the client is still sending its request, linger first."""
        if self.real_transport.is_closing() or self._lingering:
            return
        if self.conn.their_state in (h11.SEND_BODY, h11.IDLE) and self._got_bytes:
            self._linger()
        else:
            self._disarm()
            self.real_transport.close()

    def _linger(self) -> None:
        """Stop writing, read and drop what the client still sends for up to LINGER_S
        seconds (or LINGER_BYTES), then close."""
        self._lingering = True
        self.guard.count("lingering_closes")
        transport = self.real_transport
        transport.resume_reading()
        if transport.can_write_eof():
            transport.write_eof()
        self._arm(LINGER_S, transport.close)
