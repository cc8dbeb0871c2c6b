"""What a server takes per request, how it batches, and how it stops: set once at start."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Dict

from ..bilm.windows import MAX_BATCH_TOKENS
from ..errors import ElmoError, Errors
from ..validation import Rule, check_all, choice, integer, is_int, number

LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")
LOG_LEVELS = ("critical", "error", "warning", "info", "debug", "trace")  # uvicorn's
PORT = Rule("an integer in [0, 65535] (0: any free port)", lambda v: is_int(v) and 0 <= v <= 65535,
            "int")


@dataclass(frozen=True)
class Limits:
    """The most a request may hold: bytes of body, sentences (or texts), and tokens in all
    (counted after tokenizing texts); and the most numbers a JSON answer holds (binary
    answers have no such limit). Bigger requests get HTTP 413 naming the limit."""

    max_request_bytes: int = 1 << 20
    max_sentences: int = 256
    max_tokens: int = 4096
    # 4,096 tokens of one 1,024-wide layer: about 50 MB of JSON, several times that while
    # it is made
    max_json_values: int = 1 << 22


@dataclass(frozen=True)
class Batching:
    """Dynamic batching: requests that arrive within `max_wait_ms` of the first one waiting
    run in one batch of up to `max_batch_tokens` tokens (each window of a sentence also
    counts its `<S>` and `</S>`); `enabled=False` runs every request on its own. At most
    `max_queue` requests wait; more are refused (HTTP 503). A request of more than
    `step_tokens` tokens runs in steps of about that many (whole windows), beside the
    requests that come meanwhile."""

    max_wait_ms: float = 5.0
    max_batch_tokens: int = MAX_BATCH_TOKENS
    enabled: bool = True
    # requests waiting for the model, beyond which new ones get HTTP 503 (E209)
    max_queue: int = 1024
    # a long request runs in steps of about this many tokens, sharing the model with the
    # requests that arrive meanwhile
    step_tokens: int = 512


@dataclass(frozen=True)
class Connections:
    """What one client may hold of the server, and for how long: at most `max_connections`
    open at once (more are answered 503 and closed, E281); a request's headers within
    `header_timeout` seconds of the connection's start or its previous answer, and its body
    within `body_timeout` seconds (else 408, E282); `keep_alive_timeout` idle seconds between
    requests; an answer the client reads nothing of for `send_timeout` seconds is dropped
    with its connection (W034). At most `max_answers_in_flight` requests hold a place from
    the model to the end of their answer's sending; more wait for one."""

    max_connections: int = 512
    header_timeout: float = 10.0
    body_timeout: float = 30.0
    keep_alive_timeout: float = 5.0
    send_timeout: float = 30.0
    max_answers_in_flight: int = 32


@dataclass(frozen=True)
class ServeSettings:
    host: str = "127.0.0.1"
    port: int = 8080
    limits: Limits = Limits()
    batching: Batching = Batching()
    connections: Connections = Connections()
    # after SIGTERM/Ctrl-C, requests still waiting this long are refused (HTTP 503)
    shutdown_timeout: float = 30.0
    access_log: bool = True
    log_level: str = "info"

    def check(self) -> None:
        """E020 for a setting out of range, named by its flag."""
        values = {"--port": self.port, "--log-level": self.log_level,
                  "--shutdown-timeout": self.shutdown_timeout,
                  "--max-request-bytes": self.limits.max_request_bytes,
                  "--max-sentences": self.limits.max_sentences,
                  "--max-tokens": self.limits.max_tokens,
                  "--max-json-values": self.limits.max_json_values,
                  "--max-wait-ms": self.batching.max_wait_ms,
                  "--max-batch-tokens": self.batching.max_batch_tokens,
                  "--max-queue": self.batching.max_queue,
                  "--step-tokens": self.batching.step_tokens,
                  "--max-connections": self.connections.max_connections,
                  "--header-timeout": self.connections.header_timeout,
                  "--body-timeout": self.connections.body_timeout,
                  "--keep-alive-timeout": self.connections.keep_alive_timeout,
                  "--send-timeout": self.connections.send_timeout,
                  "--max-answers-in-flight": self.connections.max_answers_in_flight}
        seconds = number(0.001, 3600)
        rules = {"--port": PORT, "--log-level": choice(LOG_LEVELS), "--shutdown-timeout": number(0),
                 "--max-request-bytes": integer(1), "--max-sentences": integer(1),
                 "--max-tokens": integer(1), "--max-json-values": integer(1),
                 "--max-wait-ms": number(0, 60_000),
                 "--max-batch-tokens": integer(1), "--max-queue": integer(1),
                 "--step-tokens": integer(1),
                 "--max-connections": integer(1), "--header-timeout": seconds,
                 "--body-timeout": seconds, "--keep-alive-timeout": seconds,
                 "--send-timeout": seconds, "--max-answers-in-flight": integer(1)}
        check_all(values, rules, Errors.E020)
        if self.batching.step_tokens > self.batching.max_batch_tokens:
            raise ElmoError(Errors.E280.format(step=self.batching.step_tokens,
                                               batch=self.batching.max_batch_tokens))

    def describe(self) -> Dict[str, Any]:
        """The limits and batching settings, as /v1/info shows them."""
        return {"limits": asdict(self.limits), "batching": asdict(self.batching),
                "connections": asdict(self.connections),
                "shutdown_timeout_s": self.shutdown_timeout}
