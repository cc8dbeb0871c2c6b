"""The FastAPI app: endpoints, error answers, and the batcher's life (started and stopped with
the app). The event loop only moves bytes: decoding and checking a body, and encoding an
answer, run in the thread pool; the model runs in the batcher's worker thread.

Every error answer is JSON `{"error": {"code", "message", "status"}}` with a message of the
catalogue (E201-E217).
"""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import Future
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, AsyncIterator, Callable, Dict, List, Optional

import torch
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect

from .. import __version__
from ..errors import ElmoError, Errors, first_line
from . import answers
from .batcher import Batcher
from .connections import Guard
from .inputs import (
    ClientError,
    EmbedJob,
    check_content_type,
    check_declared_length,
    embed_job,
    parse_job,
)
from .limits import ServeSettings
from .metrics import Measured, Metrics
from .schemas import (
    EmbedRequest,
    EmbedResponse,
    ErrorResponse,
    HealthResponse,
    InfoResponse,
    ParseRequest,
    ParseResponse,
)
from .served import Served

log = logging.getLogger("uvicorn.error")
GONE = 499  # the client left: the status is logged, never sent
ERRORS: Dict[Any, Dict[str, Any]] = {
    status: {"model": ErrorResponse, "description": text} for status, text in (
        (400, "Not UTF-8, or not JSON (E204, E205)"),
        (406, "No acceptable media type (E212), or a binary answer to `texts` (E283)"),
        (413, "Over a limit: bytes, sentences or tokens (E201-E203), or numbers of a JSON "
              "answer (E271)"),
        (415, "Not declared as JSON (E213)"),
        (422, "Valid JSON that the endpoint cannot take (E206-E211)"),
        (500, "The model failed on this request (E217)"),
        (408, "The request's body did not arrive in time (E282)"),
        (503, "Stopping, too many requests waiting, or the model's thread ended (E209, E216, "
              "E275)"))}


class Places:
    """Room for `n` requests from the model to the end of their answer's sending: a client
    that reads its answer slowly (or never, until --send-timeout) holds one, so the
    answers held in memory are bounded; more requests wait for a place."""

    def __init__(self, n: int) -> None:
        self.n = n
        self._free: Optional[asyncio.Semaphore] = None  # made on the server's loop
        self.held = 0

    @asynccontextmanager
    async def hold(self) -> AsyncIterator[Place]:
        """A place, given back on leaving unless an Answer has taken it over (then the
        answer gives it back once sent)."""
        if self._free is None:
            self._free = asyncio.Semaphore(self.n)
        await self._free.acquire()
        self.held += 1
        place = Place(self)
        try:
            yield place
        finally:
            if not place.handed_over:
                place.release()


class Place:
    def __init__(self, places: Places) -> None:
        self._places = places
        self.handed_over = False
        self._released = False

    def release(self) -> None:
        if not self._released:
            self._released = True
            self._places.held -= 1
            assert self._places._free is not None
            self._places._free.release()


class Answer(Response):
    """A response written in CHUNK-byte parts, so that a slow reader's answer waits here, not
    copied whole into the socket's buffer, and that gives its Place back once written (or
    its client gone)."""

    CHUNK = 1 << 16

    def __init__(self, content: bytes, place: Place, **kwargs: Any) -> None:
        super().__init__(content, **kwargs)
        place.handed_over = True
        self._place = place

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        try:
            await send({"type": "http.response.start", "status": self.status_code,
                        "headers": self.raw_headers})
            body = memoryview(self.body)
            for start in range(0, max(len(body), 1), self.CHUNK):
                end = start + self.CHUNK
                await send({"type": "http.response.body", "body": bytes(body[start:end]),
                            "more_body": end < len(body)})
        finally:
            self._place.release()


class StopGuard:
    """While the server stops, every answer says `Connection: close` (the client opens a new
    connection, to another worker), and a POST that comes now gets 503 (E216) instead of
    joining the requests being finished."""

    def __init__(self, app: Any, batcher: Batcher) -> None:
        self.app = app
        self.batcher = batcher

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self.batcher.stopping and scope["method"] == "POST":
            await _error(ClientError(Errors.E216, 503, close=True))(scope, receive, send)
            return

        async def closing(message: Any) -> None:
            if message["type"] == "http.response.start" and self.batcher.stopping:
                headers = list(message.get("headers", []))
                if not any(k.lower() == b"connection" for k, _ in headers):
                    message = {**message, "headers": [*headers, (b"connection", b"close")]}
            await send(message)

        await self.app(scope, receive, closing)


@dataclass
class AppState:
    served: Served
    settings: ServeSettings
    batcher: Batcher
    places: Places
    guard: Guard  # the connections' counts (their protocol reads it under uvicorn)


class ClientGone(Exception):
    """The client disconnected before its answer was ready."""


def make_app(served: Served, settings: ServeSettings = ServeSettings(), *,
             threads: Optional[int] = None) -> FastAPI:
    """The app serving `served`; `threads`: torch threads of the model's worker thread."""
    batching = settings.batching
    batcher = Batcher(served.run, max_wait_s=batching.max_wait_ms / 1000,
                      max_cost=batching.max_batch_tokens, enabled=batching.enabled,
                      max_queue=batching.max_queue,
                      setup=None if threads is None else _threads_setter(threads),
                      measure=served.measure, step_tokens=batching.step_tokens)
    state = AppState(served, settings, batcher,
                     Places(settings.connections.max_answers_in_flight),
                     Guard(settings.connections))

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        batcher.start()
        try:
            yield
        finally:
            await run_in_threadpool(batcher.close)

    app = FastAPI(title="spacy-elmo", version=__version__, lifespan=lifespan,
                  summary="ELMo vectors and ELMo pipelines over HTTP, batched across clients.")
    app.state.elmo = state
    metrics = Metrics()
    metrics.watch(queue=batcher.waiting, connections=lambda: state.guard.open,
                  answers=lambda: state.places.held, events=lambda: state.guard.counts)
    batcher.on_batch = lambda jobs: metrics.batch([_sentences(job.payload) for job in jobs],
                                                  sum(job.cost for job in jobs))
    app.add_middleware(StopGuard, batcher=batcher)
    app.add_middleware(Measured, metrics=metrics)
    _add_error_handlers(app, served)
    limits = settings.limits

    @app.post("/v1/embed", response_class=Response, summary="ELMo vectors of sentences",
              openapi_extra=_body(EmbedRequest), responses={
                  200: {"model": EmbedResponse, "description": (
                      "JSON; or, by Accept, all vectors in one float32 array along the token "
                      "axis (application/x-npy: a .npy file; application/octet-stream: raw "
                      "little-endian float32), with X-Elmo-Lengths and X-Elmo-Shape headers"),
                        "content": {answers.NPY: {}, answers.RAW: {}}}, **ERRORS})
    async def embed(request: Request) -> Response:
        body = await _read_body(request, state)
        media = answers.negotiate(request.headers.get("accept"), answers.EMBED_TYPES)
        job = await run_in_threadpool(embed_job, body, limits, served.n_layers)
        if media != answers.JSON and job.texts is not None:  # no place for the tokens
            raise ClientError(Errors.E283.format(media=media), 406)
        if media == answers.JSON and job.sentences is not None:  # before the model runs
            layers = served.n_layers if job.layers == "all" else 1
            answers.check_json_values(sum(map(len, job.sentences)) * layers * served.width,
                                      limits.max_json_values)
        async with state.places.hold() as place:
            result = await _outcome(request, batcher.submit("embed", job, job.cost))
            content, headers = await run_in_threadpool(answers.embed_body, result, media,
                                                       limits.max_json_values)
            return Answer(content, place, media_type=media, headers=headers)

    if "parse" in served.kinds:
        @app.post("/v1/parse", response_class=Response, summary="Run the pipeline on texts",
                  openapi_extra=_body(ParseRequest),
                  responses={200: {"model": ParseResponse}, **ERRORS})
        async def parse(request: Request) -> Response:
            body = await _read_body(request, state)
            answers.negotiate(request.headers.get("accept"), answers.JSON_ONLY)
            job = await run_in_threadpool(parse_job, body, limits)
            async with state.places.hold() as place:
                result = await _outcome(request, batcher.submit("parse", job, job.cost))
                content = await run_in_threadpool(answers.parse_body, result,
                                                  limits.max_json_values)
                return Answer(content, place, media_type=answers.JSON)

    @app.get("/healthz", response_model=HealthResponse, summary="200 while serving",
             responses={503: {"model": HealthResponse,
                              "description": "Stopping, or failed: the model's thread ended"}})
    async def healthz() -> JSONResponse:
        if batcher.alive and not batcher.stopping:
            return JSONResponse({"status": "ok"}, 200)
        failed = batcher.failure is not None or (not batcher.stopping and not batcher.alive)
        return JSONResponse({"status": "failed" if failed else "stopping"}, 503)

    @app.get("/metrics", response_class=Response,
             summary="Requests, latency, refusals, batches, tokens, queue and connections, "
                     "in Prometheus' text format")
    async def prometheus() -> Response:
        return Response(metrics.text(), media_type=metrics.content_type)

    @app.get("/v1/info", response_model=InfoResponse,
             summary="The model, its shape, precision and checksum; limits and batching")
    async def info() -> Dict[str, Any]:
        return {**served.info, "endpoints": endpoints(app), "settings": settings.describe(),
                "stats": {**batcher.stats, **state.guard.counts,
                          "answers_in_flight": state.places.held}}

    return app


def _sentences(job: Any) -> int:
    """The sentences (or texts) of an embed or parse job."""
    if isinstance(job, EmbedJob):
        return len(job.sentences if job.sentences is not None else job.texts or [])
    return len(job.texts)


def endpoints(app: FastAPI) -> list:
    """`METHOD /path` of every endpoint (the docs' own pages left out)."""
    found = []
    for route in app.routes:
        methods = sorted(getattr(route, "methods", None) or [])
        path = getattr(route, "path", "")
        if methods and path.startswith(("/v1/", "/healthz", "/metrics")):
            found += [f"{m} {path}" for m in methods if m != "HEAD"]
    return found


def _threads_setter(threads: int) -> Callable[[], None]:
    def setup() -> None:
        torch.set_num_threads(threads)
    return setup


def _body(model: Any) -> Dict[str, Any]:
    """The OpenAPI request body of an endpoint that reads its body itself."""
    return {"requestBody": {"required": True, "content": {
        "application/json": {"schema": model.model_json_schema()}}}}


async def _read_body(request: Request, state: AppState) -> bytes:
    """The body, read up to the byte limit (E201 past it: 413, then the connection closes);
    E213 unless it is declared JSON."""
    limits = state.settings.limits
    check_content_type(request.headers.get("content-type"))
    check_declared_length(request.headers.get("content-length"), limits)
    chunks: List[bytes] = []

    async def read() -> None:
        size = 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > limits.max_request_bytes:
                raise ClientError(Errors.E201.format(size=f"at least {size}",
                                                     limit=limits.max_request_bytes), 413,
                                  close=True)
            chunks.append(chunk)

    timeout = state.settings.connections.body_timeout
    try:
        await asyncio.wait_for(read(), timeout)
    except ClientDisconnect as err:
        raise ClientGone() from err
    except asyncio.TimeoutError as err:
        raise ClientError(Errors.E282.format(what="body", seconds=timeout,
                                             flag="--body-timeout"), 408, close=True) from err
    return b"".join(chunks)


async def _outcome(request: Request, future: Future) -> Any:
    """The job's result (or its error), unless the client disconnects first: then the job
    is cancelled (skipped if it has not started) and ClientGone raised."""
    waiting = asyncio.wrap_future(future)
    gone = asyncio.ensure_future(_disconnected(request))
    try:
        done, _ = await asyncio.wait({waiting, gone}, return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:  # the server gave up on this request (forced stop)
        waiting.cancel()
        gone.cancel()
        raise
    if waiting in done:
        gone.cancel()
        return waiting.result()
    waiting.cancel()
    raise ClientGone()


async def _disconnected(request: Request) -> None:
    """Returns when the client has disconnected (the body was read before)."""
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            return


def _error(err: ClientError) -> JSONResponse:
    return JSONResponse(err.body(), err.status, headers=err.headers())


def _add_error_handlers(app: FastAPI, served: Served) -> None:
    async def client_error(request: Request, err: Exception) -> Response:
        if isinstance(err, ClientError):
            return _error(err)
        assert isinstance(err, ElmoError)  # raised by the model for this input
        return _error(ClientError(str(err), 422))

    async def client_gone(request: Request, err: Exception) -> Response:
        log.info("%s %s: the client disconnected before its answer", request.method,
                 request.url.path)
        return Response(status_code=GONE)

    async def http_error(request: Request, err: Exception) -> Response:
        assert isinstance(err, StarletteHTTPException)
        if err.status_code in (404, 405):
            if request.url.path == "/v1/parse" and "parse" not in served.kinds:
                return _error(ClientError(Errors.E214.format(path="/v1/parse"), 404))
            answer = _error(ClientError(Errors.E215.format(
                method=request.method, path=request.url.path,
                endpoints=", ".join(endpoints(app))), err.status_code))
            answer.headers.update(err.headers or {})  # 405: Allow
            return answer
        return _error(ClientError(Errors.E217.format(err=err.detail), err.status_code))

    async def internal_error(request: Request, err: Exception) -> Response:
        # Starlette raises the error again after this answer: the server logs its traceback
        return _error(ClientError(Errors.E217.format(err=first_line(err)), 500))

    app.add_exception_handler(ElmoError, client_error)
    app.add_exception_handler(ClientGone, client_gone)
    app.add_exception_handler(StarletteHTTPException, http_error)
    app.add_exception_handler(Exception, internal_error)
