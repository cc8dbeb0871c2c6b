"""`spacy-elmo serve` under load: requests/s and p50/p95 latency with 1, 8 and 32 concurrent
clients, with dynamic batching and without (every request run on its own), beside `embed`'s
in-process rate on the same sentences.

A random-weight biLM of a published shape (`--shape`, default the original ELMo's) is saved to
a temporary directory and served by `python -m spacy_elmo serve` in a child process on a free
localhost port. Each client is a thread that sends one sentence a request (10-30 news tokens
cut from the AllenNLP fixture's text, `layers` all) and waits for the answer before sending
the next; each concurrency level sends `--requests` requests in all (at least 4 a client).
Answers are raw float32 (`Accept: application/octet-stream`) unless `--accept json`. Before
the timings, the server's answers for 8 sentences are compared with the in-process embedder's
for each sentence alone. `--memory-requests N` then sends N more requests to the batching
server and prints its resident memory every N/10.

    python benchmarks/bench_serve.py [--shape original] [--clients 1,8,32] [--requests 96]
        [--threads 2] [--max-wait-ms 5] [--memory-requests 10000] [--out results/serve.md]
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before torch starts its thread pool

import argparse  # noqa: E402
import datetime  # noqa: E402
import http.client  # noqa: E402
import json  # noqa: E402
import re  # noqa: E402
import signal  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Dict, List, Optional, Sequence, Tuple  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
from spacy_elmo_lab.timing import make_sentences  # noqa: E402

from spacy_elmo.bilm import BiLM, preset  # noqa: E402
from spacy_elmo.bilm.embedder import Embedder  # noqa: E402
from spacy_elmo.bilm.hardware import cpu_flags, cpu_isa, cpu_model  # noqa: E402
from spacy_elmo.bilm.io.weights import save_bilm  # noqa: E402
from spacy_elmo.files.atomic import write_text  # noqa: E402

LISTENING = re.compile(r"Uvicorn running on http://127\.0\.0\.1:(\d+)")
START_TIMEOUT = 300.0
ACCEPT = {"raw": "application/octet-stream", "json": "application/json"}


@dataclass
class Load:
    clients: int
    requests: int
    seconds: float
    latencies: List[float]

    @property
    def rate(self) -> float:
        return self.requests / self.seconds

    def percentile(self, q: float) -> float:
        return 1000 * float(np.percentile(self.latencies, q))


class Server:
    """`python -m spacy_elmo serve WEIGHTS` in a child process; its log in a file."""

    def __init__(self, weights: Path, log: Path, threads: int, *args: str) -> None:
        self.log = log
        env = {**os.environ, "OMP_NUM_THREADS": str(threads), "NO_COLOR": "1"}
        with log.open("wb") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "spacy_elmo", "serve", str(weights), "--port", "0",
                 "--threads", str(threads), "--no-access-log", *args],
                stdout=out, stderr=subprocess.STDOUT, env=env)
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            found = LISTENING.search(log.read_text(encoding="utf-8", errors="replace"))
            if found:
                self.port = int(found.group(1))
                return
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise SystemExit(f"the server did not start:\n{log.read_text()}")
            time.sleep(0.1)

    def post(self, tokens: Sequence[str], accept: str) -> Tuple[int, Dict[str, str], bytes]:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=600)
        try:
            connection.request("POST", "/v1/embed", json.dumps({"sentences": [list(tokens)]}),
                               {"Content-Type": "application/json", "Accept": accept})
            response = connection.getresponse()
            return (response.status, {k.lower(): v for k, v in response.getheaders()},
                    response.read())
        finally:
            connection.close()

    def vectors(self, tokens: Sequence[str]) -> np.ndarray:
        status, headers, body = self.post(tokens, ACCEPT["raw"])
        if status != 200:
            raise SystemExit(f"HTTP {status}: {body[:300]!r}")
        shape = tuple(int(n) for n in headers["x-elmo-shape"].split(","))
        return np.frombuffer(body, dtype="<f4").reshape(shape)

    def rss_mb(self) -> float:
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return float("nan")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(30)


def drive(server: Server, sentences: Sequence[Sequence[str]], clients: int, requests: int,
          accept: str) -> Load:
    """`requests` requests over `clients` threads, each sending one at a time."""
    latencies: List[float] = []
    failures: List[str] = []
    lock = threading.Lock()
    per_client = [requests // clients + (i < requests % clients) for i in range(clients)]

    def client(index: int) -> None:
        for k in range(per_client[index]):
            tokens = sentences[(index * 7919 + k) % len(sentences)]
            began = time.perf_counter()
            status, _, body = server.post(tokens, accept)
            took = time.perf_counter() - began
            with lock:
                latencies.append(took)
                if status != 200:
                    failures.append(f"HTTP {status}: {body[:200]!r}")

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    began = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    seconds = time.perf_counter() - began
    if failures:
        raise SystemExit(f"{len(failures)} requests failed, e.g. {failures[0]}")
    return Load(clients, requests, seconds, latencies)


def in_process(bilm: BiLM, sentences: Sequence[Sequence[str]], batch_size: int) -> float:
    """Sentences/s of `embed`'s embedder on these sentences (a warm-up pass first)."""
    embedder = Embedder(bilm, batch_size=batch_size)
    list(embedder.embed(sentences[:batch_size]))
    began = time.perf_counter()
    list(embedder.embed(sentences))
    return len(sentences) / (time.perf_counter() - began)


def exactness(server: Server, bilm: BiLM, sentences: Sequence[Sequence[str]]) -> float:
    """Max |diff| between the server's answers and the embedder's for each sentence alone."""
    embedder = Embedder(bilm)
    worst = 0.0
    for tokens in sentences:
        alone = next(iter(embedder.embed([tokens])))
        worst = max(worst, float(np.abs(server.vectors(tokens) - alone).max()))
    return worst


def memory(server: Server, sentences: Sequence[Sequence[str]], total: int, accept: str
           ) -> List[Tuple[int, float]]:
    """(requests sent, the server's RSS in MB) every total/10 requests, 32 clients."""
    points = [(0, server.rss_mb())]
    step = max(1, total // 10)
    for sent in range(step, total + 1, step):
        drive(server, sentences, 32, step, accept)
        points.append((sent, server.rss_mb()))
    return points


def report(args: argparse.Namespace, loads: Dict[str, List[Load]], embed_rates: Dict[str, float],
           diff: float, rss: Optional[List[Tuple[int, float]]], command: str) -> str:
    flags = sorted(f for f in cpu_flags() if f.startswith(("avx", "amx", "fma")))
    lines = [
        f"# `spacy-elmo serve` under load: the {args.shape} shape",
        "",
        f"- {datetime.date.today().isoformat()}; CPU: {cpu_model()}, {os.cpu_count()} cores; "
        f"ISA: {cpu_isa()}; flags: {' '.join(flags) or 'none of avx/amx/fma'}",
        f"- torch {torch.__version__}; the server on {args.threads} thread(s); clients on the "
        f"same machine; answers {args.accept}; --max-wait-ms {args.max_wait_ms}",
        f"- command: `{command}`",
        f"- server vs embed alone, 8 sentences: max |diff| {diff:.2e}",
        f"- in-process `embed` on the same sentences: {embed_rates['alone']:.1f} sentences/s "
        f"one at a time, {embed_rates['batched']:.1f} in batches of 64",
        "",
        "| clients | batching req/s | p50 ms | p95 ms | no batching req/s | p50 ms | p95 ms "
        "| batching / no batching | batching / embed batched |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for on, off in zip(loads["batching"], loads["no batching"], strict=True):
        lines.append(
            f"| {on.clients} | {on.rate:.1f} | {on.percentile(50):.0f} | {on.percentile(95):.0f} "
            f"| {off.rate:.1f} | {off.percentile(50):.0f} | {off.percentile(95):.0f} "
            f"| {on.rate / off.rate:.2f}x | {on.rate / embed_rates['batched']:.2f} |")
    if rss is not None:
        lines += ["", f"Server memory over {rss[-1][0]:,} more requests (32 clients, batching): "
                  + ", ".join(f"{mb:.0f} MB at {n:,}" for n, mb in rss)]
    return "\n".join(lines) + "\n"


def main(argv: Optional[Sequence[str]] = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shape", default="original", help="tiny, small, medium or original")
    parser.add_argument("--clients", default="1,8,32", help="concurrency levels")
    parser.add_argument("--requests", type=int, default=96, help="requests a level")
    parser.add_argument("--threads", type=int, default=2, help="the server's torch threads")
    parser.add_argument("--max-wait-ms", type=float, default=5.0)
    parser.add_argument("--accept", choices=sorted(ACCEPT), default="raw")
    parser.add_argument("--memory-requests", type=int, default=0)
    parser.add_argument("--out", type=Path, default=None, help="write the table here too")
    args = parser.parse_args(argv)
    command = "python benchmarks/bench_serve.py " + " ".join(sys.argv[1:] if argv is None
                                                             else argv)
    levels = [int(c) for c in args.clients.split(",")]
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    bilm = BiLM(preset(args.shape)).eval()
    sentences = make_sentences(256)
    accept = ACCEPT[args.accept]
    embed_rates = {"alone": in_process(bilm, sentences[:32], 1),
                   "batched": in_process(bilm, sentences, 64)}
    loads: Dict[str, List[Load]] = {}
    rss = None
    with tempfile.TemporaryDirectory() as tmp:
        weights = Path(tmp) / "bilm"
        save_bilm(bilm, weights)
        diff = 0.0
        for mode, flag in (("batching", "--batching"), ("no batching", "--no-batching")):
            server = Server(weights, Path(tmp) / f"{mode}.log", args.threads, flag,
                            "--max-wait-ms", str(args.max_wait_ms))
            try:
                if mode == "batching":
                    diff = exactness(server, bilm, sentences[:8])
                drive(server, sentences, 1, 4, accept)  # warm-up
                loads[mode] = [drive(server, sentences, c, max(args.requests, 4 * c), accept)
                               for c in levels]
                if mode == "batching" and args.memory_requests:
                    rss = memory(server, sentences, args.memory_requests, accept)
            finally:
                server.stop()
    text = report(args, loads, embed_rates, diff, rss, command)
    print(text)
    if args.out is not None:
        write_text(args.out, text)
    return text


if __name__ == "__main__":
    main()
