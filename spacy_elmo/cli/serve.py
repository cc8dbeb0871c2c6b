"""`spacy-elmo serve`: ELMo vectors (and an ELMo pipeline) over HTTP, batched across clients.

FastAPI and uvicorn come with the `serve` extra; without them the command says how to
install them (E200) before it loads anything."""

from __future__ import annotations

import importlib.util
import signal
from typing import Optional

import torch
import typer
from wasabi import msg

from ..bilm.hardware import select_device
from ..errors import ElmoError, Errors, Warnings, warn
from ..serve.limits import LOCAL_HOSTS, Batching, Connections, Limits, ServeSettings
from ..validation import check_all, thread_count
from .common import FORMAT_HELP, OPTIONS_HELP, WEIGHTS_HELP, app, fail

SERVE_HELP = (
    "Serve ELMo vectors over HTTP: POST /v1/embed (and /v1/parse for a pipeline), GET "
    "/healthz and /v1/info, API docs at /docs. SOURCE is a biLM (" + WEIGHTS_HELP.rstrip(".")
    + "; default: the small biLM bundled for --lang) or a saved spaCy pipeline directory "
    "with an `elmo` component. Requests that arrive within --max-wait-ms run in one batch. "
    "Needs the serve extra: pip install 'spacy-elmo[serve]'. Stops on SIGTERM or Ctrl-C "
    "(exit status 143 or 130) after answering the requests in flight.")
EXTRA = ("fastapi", "uvicorn", "prometheus_client")


@app.command("serve", help=SERVE_HELP)
def serve_cli(
    source: Optional[str] = typer.Argument(None, metavar="[SOURCE]", help=(
        "A biLM (weights file, directory, published name, URL) or a pipeline directory.")),
    host: str = typer.Option("127.0.0.1", "--host", help=(
        "Address to bind (other machines can reach 0.0.0.0 or a public address).")),
    port: int = typer.Option(8080, "--port", help="TCP port (0: any free one)."),
    lang: str = typer.Option("en", "--lang", help=(
        "The bundled biLM's language (without SOURCE), and the tokenizer of texts sent "
        "without a language.")),
    options: Optional[str] = typer.Option(None, "--options", help=OPTIONS_HELP),
    weights_format: str = typer.Option("auto", "--format", help=FORMAT_HELP),
    precision: Optional[str] = typer.Option(None, "--precision", help=(
        "The biLM's inference precision, as embed's --precision takes it (e.g. fp32, int8); "
        "default: fp32 for a biLM, a pipeline's own setting.")),
    gpu_id: int = typer.Option(-1, "--gpu-id", help="CUDA device to run on (-1: CPU)."),
    threads: Optional[int] = typer.Option(None, "--threads", help=(
        "torch CPU threads of the model (default: torch's).")),
    max_batch_tokens: int = typer.Option(Batching.max_batch_tokens, "--max-batch-tokens",
                                         help=("Tokens (with <S>, </S>) a batch collects from "
                                               "waiting requests.")),
    max_wait_ms: float = typer.Option(Batching.max_wait_ms, "--max-wait-ms", help=(
        "How long the first request waiting may wait for others to join its batch.")),
    batching: bool = typer.Option(True, "--batching/--no-batching", help=(
        "--no-batching runs every request on its own.")),
    max_queue: int = typer.Option(Batching.max_queue, "--max-queue", help=(
        "Requests that may wait for the model; more get HTTP 503.")),
    step_tokens: int = typer.Option(Batching.step_tokens, "--step-tokens", help=(
        "A longer request runs in steps of about this many tokens, sharing the model with "
        "the requests that come meanwhile.")),
    max_request_bytes: int = typer.Option(Limits.max_request_bytes, "--max-request-bytes",
                                          help="Largest request body."),
    max_sentences: int = typer.Option(Limits.max_sentences, "--max-sentences", help=(
        "Most sentences (or texts) a request.")),
    max_tokens: int = typer.Option(Limits.max_tokens, "--max-tokens", help=(
        "Most tokens a request (texts: once tokenized).")),
    max_json_values: int = typer.Option(Limits.max_json_values, "--max-json-values", help=(
        "Most numbers a JSON answer holds (binary answers: no limit); larger ones get HTTP "
        "413.")),
    max_connections: int = typer.Option(Connections.max_connections, "--max-connections",
                                        help=("Connections open at once; more get HTTP 503 "
                                              "and are closed (lowered to what ulimit -n "
                                              "allows).")),
    header_timeout: float = typer.Option(Connections.header_timeout, "--header-timeout", help=(
        "Seconds a client has to send a request's headers (from its connection or its "
        "previous answer); then the connection is closed.")),
    body_timeout: float = typer.Option(Connections.body_timeout, "--body-timeout", help=(
        "Seconds a client has to send a request's body; then HTTP 408.")),
    keep_alive_timeout: float = typer.Option(Connections.keep_alive_timeout,
                                             "--keep-alive-timeout", help=(
                                                 "Idle seconds a connection is kept between "
                                                 "requests.")),
    send_timeout: float = typer.Option(Connections.send_timeout, "--send-timeout", help=(
        "Seconds a client may read nothing of its answer before the answer is dropped with "
        "the connection.")),
    max_answers_in_flight: int = typer.Option(Connections.max_answers_in_flight,
                                              "--max-answers-in-flight", help=(
                                                  "Requests between the model and the end of "
                                                  "their answer's sending; more wait.")),
    shutdown_timeout: float = typer.Option(ServeSettings.shutdown_timeout, "--shutdown-timeout",
                                           help=("After SIGTERM/Ctrl-C, seconds to answer the "
                                                 "requests waiting; later ones get HTTP 503.")),
    access_log: bool = typer.Option(True, "--access-log/--no-access-log", help=(
        "Log a line a request.")),
    log_level: str = typer.Option("info", "--log-level", help=(
        "uvicorn's log level: critical, error, warning, info, debug or trace.")),
) -> None:
    """The `serve` command (help text: SERVE_HELP)."""
    missing = [name for name in EXTRA if importlib.util.find_spec(name) is None]
    if missing:
        fail(Errors.E200.format(missing=" and ".join(missing)))
    from ..serve.run import check_listen, serve
    from ..serve.served import open_served

    settings = ServeSettings(
        host=host, port=port, shutdown_timeout=shutdown_timeout, access_log=access_log,
        log_level=log_level.lower(),
        limits=Limits(max_request_bytes=max_request_bytes, max_sentences=max_sentences,
                      max_tokens=max_tokens, max_json_values=max_json_values),
        batching=Batching(max_wait_ms=max_wait_ms, max_batch_tokens=max_batch_tokens,
                          enabled=batching, max_queue=max_queue, step_tokens=step_tokens),
        connections=Connections(max_connections=max_connections, header_timeout=header_timeout,
                                body_timeout=body_timeout,
                                keep_alive_timeout=keep_alive_timeout,
                                send_timeout=send_timeout,
                                max_answers_in_flight=max_answers_in_flight))
    try:
        settings.check()
        check_all({"--threads": threads}, {"--threads": thread_count(optional=True)},
                  Errors.E020)
        if port != 0:
            check_listen(host, port)
        device = select_device(gpu_id)
        if threads is not None:
            torch.set_num_threads(threads)
        served = open_served(source, options=options, weights_format=weights_format,
                             lang=lang, device=device, gpu_id=gpu_id, precision=precision,
                             max_batch_tokens=max_batch_tokens)
    except ElmoError as err:
        fail(str(err))
    except KeyboardInterrupt:
        fail(Errors.E274, code=130)
    if host not in LOCAL_HOSTS:
        warn(Warnings.W030.format(host=host))
    msg.info(f"Serving {served.info['model']['kind']} {served.info['model']['source']!r} "
             f"({served.n_layers} layers x {served.width}, {served.bilm.precision}).")
    try:
        stopped_by = serve(served, settings, threads=threads)
    except ElmoError as err:
        fail(str(err))
    if stopped_by is not None:
        msg.good(f"Stopped by {signal.Signals(stopped_by).name}.")
        raise typer.Exit(128 + stopped_by)
