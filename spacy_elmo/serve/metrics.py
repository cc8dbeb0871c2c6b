"""`GET /metrics`: the server's counters in Prometheus' text format (prometheus_client), one
registry an app.

Requests by route and status, and their latency (from the request's headers to the end of
its answer); refusals by error code (every error answer carries its code in `X-Elmo-Error`);
batches in requests, sentences and tokens, and tokens run (tokens/s: `rate()` of it); the
queue, connections and answers in flight now; connection events (refused, timed out,
lingering closes, accept pauses).
"""

from __future__ import annotations

import time
from typing import Any, Callable, Dict, Iterator, List, Sequence

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

ROUTES = ("/v1/embed", "/v1/parse", "/v1/info", "/healthz", "/metrics")
ERROR_HEADER = b"x-elmo-error"
SECONDS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
SIZES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
TOKENS = (16, 64, 256, 1024, 2048, 4096, 8192, 16384, 32768)


class _Events:
    """A collector reading counts kept elsewhere (the connections' Guard) at each scrape."""

    def __init__(self, name: str, documentation: str, label: str,
                 counts: Callable[[], Dict[str, int]]) -> None:
        self._name, self._doc, self._label, self._counts = name, documentation, label, counts

    def collect(self) -> Iterator[Metric]:
        family = CounterMetricFamily(self._name, self._doc, labels=[self._label])
        for key, value in sorted(self._counts().items()):
            family.add_metric([key], value)
        yield family


class Metrics:
    """The server's metrics; `watch` ties the gauges to the live objects."""

    content_type = CONTENT_TYPE_LATEST

    def __init__(self) -> None:
        self.registry = registry = CollectorRegistry()
        self.requests = Counter("elmo_requests", "HTTP requests answered, by route and status",
                                ["route", "status"], registry=registry)
        self.latency = Histogram("elmo_request_seconds", "Seconds from a request's headers to "
                                 "the end of its answer, by route", ["route"],
                                 buckets=SECONDS, registry=registry)
        self.refusals = Counter("elmo_refusals", "Error answers, by error code", ["code"],
                                registry=registry)
        self.batch_requests = Histogram("elmo_batch_requests", "Requests a batch",
                                        buckets=SIZES, registry=registry)
        self.batch_sentences = Histogram("elmo_batch_sentences", "Sentences (or texts) a batch",
                                         buckets=SIZES, registry=registry)
        self.batch_tokens = Histogram("elmo_batch_tokens", "Tokens a batch, with <S> and </S>",
                                      buckets=TOKENS, registry=registry)
        self.tokens = Counter("elmo_tokens", "Tokens run through the model, with <S> and </S>",
                              registry=registry)

    def watch(self, *, queue: Callable[[], float], connections: Callable[[], float],
              answers: Callable[[], float], events: Callable[[], Dict[str, int]]) -> None:
        for name, doc, read in (
                ("elmo_queue_depth", "Requests waiting for the model", queue),
                ("elmo_connections_open", "Connections open (refused ones closing included)",
                 connections),
                ("elmo_answers_in_flight", "Requests between the model and the end of their "
                 "answer's sending", answers)):
            Gauge(name, doc, registry=self.registry).set_function(read)
        self.registry.register(_Events("elmo_connection_events", "Connections refused (503), "
                                       "timed out (header, send), closed lingering, and "
                                       "pauses of accepting", "event", events))

    def batch(self, sentences: Sequence[int], tokens: int) -> None:
        """A batch about to run: each request's sentences, and the batch's tokens."""
        self.batch_requests.observe(len(sentences))
        self.batch_sentences.observe(sum(sentences))
        self.batch_tokens.observe(tokens)
        self.tokens.inc(tokens)

    def text(self) -> bytes:
        return generate_latest(self.registry)


class Measured:
    """ASGI middleware: each HTTP answer's route, status, latency and error code."""

    def __init__(self, app: Any, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope.get("path", "")
        route = path if path in ROUTES else "other"
        started = time.monotonic()
        status: List[int] = []

        async def measuring(message: Any) -> None:
            if message["type"] == "http.response.start":
                status.append(message["status"])
                for key, value in message.get("headers", []):
                    if key.lower() == ERROR_HEADER:
                        self.metrics.refusals.labels(value.decode("ascii")).inc()
            await send(message)
            if message["type"] == "http.response.body" and not message.get("more_body"):
                self._done(route, status, started)

        await self.app(scope, receive, measuring)

    def _done(self, route: str, status: List[int], started: float) -> None:
        self.metrics.requests.labels(route, str(status[0])).inc()
        self.metrics.latency.labels(route).observe(time.monotonic() - started)
