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
from .inputs import ClientError, check_content_type, check_declared_length, embed_job, parse_job
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
from .settings import ServeSettings

log = logging.getLogger("uvicorn.error")
GONE = 499  # the client left: the status is logged, never sent
ERRORS: Dict[Any, Dict[str, Any]] = {
    status: {"model": ErrorResponse, "description": text} for status, text in (
        (400, "Not UTF-8, or not JSON (E204, E205)"),
        (406, "No acceptable media type (E212)"),
        (413, "Over a limit: bytes, sentences or tokens (E201-E203), or numbers of a JSON "
              "answer (E271)"),
        (415, "Not declared as JSON (E213)"),
        (422, "Valid JSON that the endpoint cannot take (E206-E211)"),
        (500, "The model failed on this request (E217)"),
        (503, "Stopping, too many requests waiting, or the model's thread ended (E209, E216, "
              "E275)"))}


@dataclass
class AppState:
    served: Served
    settings: ServeSettings
    batcher: Batcher


class ClientGone(Exception):
    """The client disconnected before its answer was ready."""


def make_app(served: Served, settings: ServeSettings = ServeSettings(), *,
             threads: Optional[int] = None) -> FastAPI:
    """The app serving `served`; `threads`: torch threads of the model's worker thread."""
    batching = settings.batching
    batcher = Batcher(served.run, max_wait_s=batching.max_wait_ms / 1000,
                      max_cost=batching.max_batch_tokens, enabled=batching.enabled,
                      max_queue=batching.max_queue,
                      setup=None if threads is None else _threads_setter(threads))
    state = AppState(served, settings, batcher)

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
        if media == answers.JSON and job.sentences is not None:  # before the model runs
            layers = served.n_layers if job.layers == "all" else 1
            answers.check_json_values(sum(map(len, job.sentences)) * layers * served.width,
                                      limits.max_json_values)
        result = await _outcome(request, batcher.submit("embed", job, job.cost))
        content, headers = await run_in_threadpool(answers.embed_body, result, media,
                                                   limits.max_json_values)
        return Response(content, media_type=media, headers=headers)

    if "parse" in served.kinds:
        @app.post("/v1/parse", response_class=Response, summary="Run the pipeline on texts",
                  openapi_extra=_body(ParseRequest),
                  responses={200: {"model": ParseResponse}, **ERRORS})
        async def parse(request: Request) -> Response:
            body = await _read_body(request, state)
            answers.negotiate(request.headers.get("accept"), answers.JSON_ONLY)
            job = await run_in_threadpool(parse_job, body, limits)
            result = await _outcome(request, batcher.submit("parse", job, job.cost))
            content = await run_in_threadpool(answers.parse_body, result,
                                              limits.max_json_values)
            return Response(content, media_type=answers.JSON)

    @app.get("/healthz", response_model=HealthResponse, summary="200 while serving",
             responses={503: {"model": HealthResponse,
                              "description": "Stopping, or failed: the model's thread ended"}})
    async def healthz() -> JSONResponse:
        if batcher.alive and not batcher.stopping:
            return JSONResponse({"status": "ok"}, 200)
        failed = batcher.failure is not None or (not batcher.stopping and not batcher.alive)
        return JSONResponse({"status": "failed" if failed else "stopping"}, 503)

    @app.get("/v1/info", response_model=InfoResponse,
             summary="The model, its shape, precision and checksum; limits and batching")
    async def info() -> Dict[str, Any]:
        return {**served.info, "endpoints": endpoints(app), "settings": settings.describe(),
                "stats": dict(batcher.stats)}

    return app


def endpoints(app: FastAPI) -> list:
    """`METHOD /path` of every endpoint (the docs' own pages left out)."""
    found = []
    for route in app.routes:
        methods = sorted(getattr(route, "methods", None) or [])
        path = getattr(route, "path", "")
        if methods and path.startswith(("/v1/", "/healthz")):
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
    size = 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > limits.max_request_bytes:
                raise ClientError(Errors.E201.format(size=f"at least {size}",
                                                     limit=limits.max_request_bytes), 413,
                                  close=True)
            chunks.append(chunk)
    except ClientDisconnect as err:
        raise ClientGone() from err
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
    headers = {"Connection": "close"} if err.close else {}
    if err.status == 503:
        headers["Retry-After"] = "1"
    return JSONResponse({"error": {"code": err.code, "message": str(err),
                                   "status": err.status}}, err.status, headers=headers)


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
