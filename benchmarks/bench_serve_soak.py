"""`spacy-elmo serve` under a real load generator and a hostile mix: throughput and latency
percentiles with wrk at 1, 8, 32 and 128 connections, then a soak of normal clients beside
idle connections, slow readers and texts of few words and many tokens.

The server runs the bundled English biLM (`python -m spacy_elmo serve`, a child process on a
free localhost port, `--threads 1`: the load generators take the other core).

1. **Load**: `wrk` (Debian's package) posts one 20-token sentence a request (JSON, layers
   `mix`) over N keep-alive connections for `--load-seconds`; its Lua script prints p50, p95
   and p99, and the status and socket-error counts.
2. **Alone**: `--normal` Python clients (keep-alive, one request at a time, 10-30 token
   sentences, layers `mix`) for `--alone-seconds`: their p95 alone.
3. **Mix**, for `--soak-seconds`: the same normal clients, beside `--idle` connections that
   send nothing (each reconnects when the server closes it), `--slow` clients that ask for
   all layers of 1,024 tokens as JSON and read 1 KiB a second, and `--heavy` clients sending
   `"!?" * 2048` as text (4,096 tokens, one whitespace word). The server's RSS is read every
   5 s. Goals: the normal clients' p95 within 2x of their p95 alone, RSS within the bound
   docs/serving.md states, no traceback in the log, every request answered (200, 4xx or
   503) and none reset.

Every loop ends by its deadline; every socket and the server are closed at the end.

    python benchmarks/bench_serve_soak.py [--load-seconds 20] [--alone-seconds 60]
        [--soak-seconds 600] [--out benchmarks/results/serve_soak.md]
"""

from __future__ import annotations

import argparse
import datetime
import http.client
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import numpy as np
import torch
from bench_serve import Server
from spacy_elmo_lab.timing import make_sentences

from spacy_elmo.bilm.hardware import cpu_flags, cpu_isa, cpu_model
from spacy_elmo.files.atomic import write_text
from spacy_elmo.serve.limits import Connections, Limits

ROOT = Path(__file__).resolve().parents[1]
BUNDLED = ROOT / "spacy_elmo" / "data" / "elmo_en_small"
LAYERS, WIDTH = 3, 256  # the bundled English biLM
WRK_SCRIPT = r"""
wrk.method = "POST"
wrk.body = '%s'
wrk.headers["Content-Type"] = "application/json"
local statuses = {}
response = function(status, headers, body)
  statuses[status] = (statuses[status] or 0) + 1
end
done = function(summary, latency, requests)
  local counts = {}
  for status, n in pairs(statuses) do counts[#counts + 1] = status .. "=" .. n end
  io.write(string.format("RESULT %%d %%.3f %%.3f %%.3f %%.3f %%d %%d %%d %%d %%d %%s\n",
    summary.requests, summary.duration / 1e6, latency:percentile(50) / 1e3,
    latency:percentile(95) / 1e3, latency:percentile(99) / 1e3, summary.errors.connect,
    summary.errors.read, summary.errors.write, summary.errors.timeout, summary.errors.status,
    table.concat(counts, ",")))
end
"""


@dataclass
class Tally:
    """What one class of clients saw."""

    latencies: List[float] = field(default_factory=list)
    statuses: Counter = field(default_factory=Counter)
    resets: int = 0
    errors: Counter = field(default_factory=Counter)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, seconds: Optional[float], status: Optional[int], err: Optional[str] = None
            ) -> None:
        with self.lock:
            if seconds is not None:
                self.latencies.append(seconds)
            if status is not None:
                self.statuses[status] += 1
            if err is not None:
                self.errors[err] += 1
                if "Reset" in err or "BrokenPipe" in err:
                    self.resets += 1

    def p(self, q: float) -> float:
        return 1000 * float(np.percentile(self.latencies, q)) if self.latencies else float("nan")


def wrk(port: int, connections: int, seconds: int, body: str) -> Dict[str, object]:
    """One wrk run (2 threads, `connections` keep-alive connections)."""
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as f:
        f.write(WRK_SCRIPT % body.replace("'", "\\'"))
        script = f.name
    try:
        done = subprocess.run(["wrk", "-t", str(min(2, connections)), "-c", str(connections),
                               "-d", f"{seconds}s", "--timeout", "30s", "-s", script,
                               f"http://127.0.0.1:{port}/v1/embed"],
                              capture_output=True, text=True, timeout=seconds + 120)
    finally:
        os.unlink(script)
    found = re.search(r"^RESULT (.*)$", done.stdout, re.M)
    if not found:
        raise SystemExit(f"wrk gave no result:\n{done.stdout}\n{done.stderr}")
    parts = found.group(1).split()
    n, duration = int(parts[0]), float(parts[1])
    return {"connections": connections, "requests": n, "rate": n / duration,
            "p50": float(parts[2]), "p95": float(parts[3]), "p99": float(parts[4]),
            "errors": dict(zip(("connect", "read", "write", "timeout", "status"),
                               map(int, parts[5:10]), strict=True)),
            "statuses": parts[10] if len(parts) > 10 else ""}


def normal_client(port: int, sentences: Sequence[Sequence[str]], deadline: float,
                  tally: Tally, index: int) -> None:
    """One request at a time over a kept-alive connection (a new one when closed)."""
    connection: Optional[http.client.HTTPConnection] = None
    k = 0
    while time.monotonic() < deadline:
        tokens = sentences[(index * 7919 + k) % len(sentences)]
        k += 1
        body = json.dumps({"sentences": [list(tokens)], "layers": "mix"})
        began = time.perf_counter()
        try:
            if connection is None:
                connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
            connection.request("POST", "/v1/embed", body, {"Content-Type": "application/json"})
            response = connection.getresponse()
            response.read()
            tally.add(time.perf_counter() - began, response.status)
            if response.getheader("connection", "").lower() == "close":
                connection.close()
                connection = None
        except (OSError, http.client.HTTPException) as err:
            tally.add(None, None, type(err).__name__)
            if connection is not None:
                connection.close()
            connection = None
    if connection is not None:
        connection.close()


def idle_connection(port: int, deadline: float, tally: Tally) -> None:
    """Opens a connection and sends nothing; when the server closes it, opens another."""
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
                sock.settimeout(max(0.1, min(60.0, deadline - time.monotonic())))
                try:
                    data = sock.recv(65536)
                    tally.add(None, 0 if not data else int(data[9:12]))  # 0: closed silently
                except TimeoutError:
                    pass
        except OSError as err:
            tally.add(None, None, type(err).__name__)
            time.sleep(0.5)


def slow_reader(port: int, deadline: float, tally: Tally) -> None:
    """Asks for a large answer (all layers of 1,024 tokens: 9 MB of JSON, more than the
    sockets' buffers hold) and reads 1 KiB a second."""
    body = json.dumps({"sentences": [["word"] * 1024], "layers": "all"}).encode()
    head = (f"POST /v1/embed HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode()
    while time.monotonic() < deadline:
        try:
            sock = socket.socket()
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.settimeout(120)  # a patient client: it waits for its answer, then reads slowly
            sock.connect(("127.0.0.1", port))
            with sock:
                sock.sendall(head + body)
                first = sock.recv(1024)
                status = int(first[9:12]) if first.startswith(b"HTTP/1.1") else None
                while time.monotonic() < deadline:
                    time.sleep(1.0)
                    if not sock.recv(1024):
                        break
                tally.add(None, status)
        except (OSError, ValueError) as err:
            tally.add(None, None, type(err).__name__)
            time.sleep(0.5)


def heavy_client(port: int, deadline: float, tally: Tally) -> None:
    """Texts of one whitespace word and 4,096 tokens, one after another."""
    body = json.dumps({"texts": ["!?" * 2048], "lang": "en", "layers": "mix"})
    while time.monotonic() < deadline:
        began = time.perf_counter()
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
        try:
            connection.request("POST", "/v1/embed", body, {"Content-Type": "application/json"})
            response = connection.getresponse()
            response.read()
            tally.add(time.perf_counter() - began, response.status)
        except (OSError, http.client.HTTPException) as err:
            tally.add(None, None, type(err).__name__)
        finally:
            connection.close()


def run_clients(targets: List[threading.Thread]) -> None:
    for thread in targets:
        thread.start()
    for thread in targets:
        thread.join()


def memory_bound_mb(connections: Connections, limits: Limits) -> float:
    """docs/serving.md's bound on what the server holds beyond the model: bodies, answers in
    flight (JSON at worst), one batch (counted in the baseline)."""
    answer = min(limits.max_tokens * LAYERS * WIDTH, limits.max_json_values) * 12
    return (connections.max_connections * limits.max_request_bytes
            + connections.max_answers_in_flight * answer) / 2**20


def main(argv: Optional[Sequence[str]] = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--load-seconds", type=int, default=20)
    parser.add_argument("--levels", default="1,8,32,128")
    parser.add_argument("--alone-seconds", type=int, default=60)
    parser.add_argument("--soak-seconds", type=int, default=600)
    parser.add_argument("--normal", type=int, default=32)
    parser.add_argument("--idle", type=int, default=100)
    parser.add_argument("--slow", type=int, default=20)
    parser.add_argument("--heavy", type=int, default=8)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    if shutil.which("wrk") is None:
        raise SystemExit("wrk is not installed: apt-get install wrk (Debian's package)")
    command = "python benchmarks/bench_serve_soak.py " + " ".join(
        sys.argv[1:] if argv is None else argv)
    sentences = make_sentences(256)
    load_body = json.dumps({"sentences": [list(sentences[0][:20])], "layers": "mix"})
    with tempfile.TemporaryDirectory() as tmp:
        server = Server(BUNDLED, Path(tmp) / "server.log", 1)
        try:
            loads = [wrk(server.port, c, args.load_seconds, load_body)
                     for c in map(int, args.levels.split(","))]
            base_rss = server.rss_mb()
            alone = Tally()
            deadline = time.monotonic() + args.alone_seconds
            run_clients([threading.Thread(target=normal_client,
                                          args=(server.port, sentences, deadline, alone, i))
                         for i in range(args.normal)])
            tallies = {name: Tally() for name in ("normal", "idle", "slow", "heavy")}
            deadline = time.monotonic() + args.soak_seconds
            rss: List[float] = []
            stop = threading.Event()

            def sample() -> None:
                while not stop.wait(5.0):
                    rss.append(server.rss_mb())

            sampler = threading.Thread(target=sample)
            sampler.start()
            port = server.port
            run_clients(
                [threading.Thread(target=normal_client,
                                  args=(port, sentences, deadline, tallies["normal"], i))
                 for i in range(args.normal)]
                + [threading.Thread(target=idle_connection, args=(port, deadline,
                                                                  tallies["idle"]))
                   for _ in range(args.idle)]
                + [threading.Thread(target=slow_reader, args=(port, deadline, tallies["slow"]))
                   for _ in range(args.slow)]
                + [threading.Thread(target=heavy_client, args=(port, deadline,
                                                               tallies["heavy"]))
                   for _ in range(args.heavy)])
            stop.set()
            sampler.join()
            info = json.loads(_get(server.port, "/v1/info"))
        finally:
            server.stop()
        log = (Path(tmp) / "server.log").read_text(encoding="utf-8", errors="replace")
    bound = memory_bound_mb(Connections(), Limits())
    text = report(args, command, loads, alone, tallies, base_rss, rss, bound, info, log)
    print(text)
    if args.out is not None:
        write_text(args.out, text)
    return text


def _get(port: int, path: str) -> bytes:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        connection.request("GET", path)
        return connection.getresponse().read()
    finally:
        connection.close()


def report(args: argparse.Namespace, command: str, loads: List[Dict[str, object]], alone: Tally,
           tallies: Dict[str, Tally], base_rss: float, rss: List[float], bound: float,
           info: Dict[str, object], log: str) -> str:
    flags = sorted(f for f in cpu_flags() if f.startswith(("avx", "amx", "fma")))
    normal = tallies["normal"]
    ratio = normal.p(95) / alone.p(95)
    peak = max(rss) if rss else float("nan")
    lines = [
        "# `spacy-elmo serve` under wrk and a hostile mix: the bundled English biLM",
        "",
        f"- {datetime.date.today().isoformat()}; CPU: {cpu_model()}, {os.cpu_count()} cores; "
        f"ISA: {cpu_isa()}; flags: {' '.join(flags) or 'none of avx/amx/fma'}; torch "
        f"{torch.__version__}; the server on 1 thread, wrk and the Python clients on the same "
        "machine",
        f"- command: `{command}`",
        "",
        "## Load (wrk, one 20-token sentence a request, layers mix, JSON)",
        "",
        "| connections | requests/s | p50 ms | p95 ms | p99 ms | socket errors "
        "(connect/read/write/timeout) | statuses |",
        "|---:|---:|---:|---:|---:|---|---|",
    ]
    for load in loads:
        errors = load["errors"]
        assert isinstance(errors, dict)
        lines.append(f"| {load['connections']} | {load['rate']:.1f} | {load['p50']:.1f} "
                     f"| {load['p95']:.1f} | {load['p99']:.1f} | {errors['connect']}/"
                     f"{errors['read']}/{errors['write']}/{errors['timeout']} "
                     f"| {load['statuses']} |")
    tracebacks = log.count("Traceback")
    lines += [
        "",
        f"## Soak: {args.soak_seconds} s of {args.normal} normal clients beside {args.idle} "
        f"idle connections, {args.slow} slow readers and {args.heavy} clients of 4,096-token "
        "texts",
        "",
        "| clients | answers | statuses | p50 ms | p95 ms | resets | other client errors |",
        "|---|---:|---|---:|---:|---:|---|",
        f"| normal, alone ({args.alone_seconds} s) | {sum(alone.statuses.values()):,} "
        f"| {dict(alone.statuses)} | {alone.p(50):.0f} | {alone.p(95):.0f} | {alone.resets} "
        f"| {dict(alone.errors)} |",
    ]
    for name, tally in tallies.items():
        lines.append(f"| {name} | {sum(tally.statuses.values()):,} | {dict(tally.statuses)} "
                     f"| {tally.p(50):.0f} | {tally.p(95):.0f} | {tally.resets} "
                     f"| {dict(tally.errors)} |")
    lines += [
        "",
        "(idle: status 0 is a connection the server closed silently at --header-timeout; "
        "slow: the status of each answer's first bytes, its connection dropped at "
        "--send-timeout)",
        "",
        f"- normal clients' p95 in the mix / alone: **{ratio:.2f}x** (goal: at most 2x)",
        f"- server RSS: {base_rss:.0f} MB before the soak, at most {peak:.0f} MB during it "
        f"(+{peak - base_rss:.0f} MB; the bound docs/serving.md states for the defaults: "
        f"{bound:,.0f} MB beyond the model)",
        f"- tracebacks in the server's log: {tracebacks}; resets seen by clients: "
        f"{sum(t.resets for t in tallies.values())}",
        f"- the server's own counts (`/v1/info` stats): {json.dumps(info.get('stats'))}",
    ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
