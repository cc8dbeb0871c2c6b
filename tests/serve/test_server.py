"""A real server: `spacy-elmo serve` under uvicorn on a free localhost port, its answers
against `embed`'s under concurrent clients, bad input on the wire (disconnects included),
and a clean stop on SIGTERM with the request in flight answered."""

import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from .conftest import OPTIONS, WEIGHTS
from .test_app import assert_close

pytest.importorskip("fastapi", reason="the serve extra is not installed")
pytest.importorskip("uvicorn", reason="the serve extra is not installed")

START_TIMEOUT = 120  # seconds for the process to listen (a loaded machine is slow)
LISTENING = re.compile(r"Uvicorn running on http://127\.0\.0\.1:(\d+)")


class Server:
    """`python -m spacy_elmo serve` in a child process, its log in a file."""

    def __init__(self, tmp: Path, *args: str, **popen: Any) -> None:
        self.log = tmp / "server.log"
        env = {**os.environ, "OMP_NUM_THREADS": "1", "NO_COLOR": "1"}
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "spacy_elmo", "serve", str(WEIGHTS), "--options",
                 str(OPTIONS), "--port", "0", "--threads", "1", *args],
                stdout=log, stderr=subprocess.STDOUT, env=env, **popen)
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            found = LISTENING.search(self.text())
            if found:
                self.port = int(found.group(1))
                break
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                pytest.fail(f"the server did not start:\n{self.text()}")
            time.sleep(0.05)

    def text(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")

    def request(self, method, path, body=None, headers=None):
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        try:
            connection.request(method, path, body=body, headers=headers or {})
            response = connection.getresponse()
            return response.status, dict(response.getheaders()), response.read()
        finally:
            connection.close()

    def embed(self, payload):
        status, _, body = self.request("POST", "/v1/embed", json.dumps(payload),
                                       {"Content-Type": "application/json"})
        assert status == 200, body
        return json.loads(body)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(30)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    running = Server(tmp_path_factory.mktemp("server"), "--max-wait-ms", "50",
                     "--max-request-bytes", "65536", "--max-tokens", "1000")
    yield running
    running.stop()


def test_concurrent_clients_get_what_embed_gives(server, embedded):
    sentences, alone = embedded["sentences"], embedded["all"]
    requests = [[i] if i % 3 else [i, (i + 7) % 30] for i in range(30)]  # 1 or 2 sentences
    answers = {}

    def client(mine):
        for numbers in mine:
            got = server.embed({"sentences": [sentences[i] for i in numbers]})
            answers[tuple(numbers)] = got["embeddings"]

    before = json.loads(server.request("GET", "/v1/info")[2])["stats"]["requests"]
    threads = [threading.Thread(target=client, args=(requests[k::8],)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert len(answers) == len(requests)
    for numbers, embeddings in answers.items():
        for i, got in zip(numbers, embeddings, strict=True):
            assert_close(got, alone[i])
    stats = json.loads(server.request("GET", "/v1/info")[2])["stats"]
    assert stats["requests"] - before == len(requests)


def raw_exchange(port: int, data: bytes) -> bytes:
    """Send raw bytes and read until the server closes the connection."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(data)
        chunks = []
        while chunk := s.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def post_head(port: int, length: int, content_type: str = "application/json") -> bytes:
    return (f"POST /v1/embed HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: "
            f"{content_type}\r\nContent-Length: {length}\r\n\r\n").encode()


def error_code(body: bytes) -> str:
    return json.loads(body)["error"]["code"]


def test_bad_input_on_the_wire_harms_nobody(server, embedded):
    sentence = embedded["sentences"][5]
    before = server.embed({"sentences": [sentence]})["embeddings"][0]
    headers = {"Content-Type": "application/json"}
    for body, status, code in [
        (b"\xc3\x28", 400, "E204"), (b'{"sentences": [["a"]', 400, "E205"),
        (b'{"sentences": [[true]]}', 422, "E206"),
        (json.dumps({"sentences": [["a"]] * 300}).encode(), 413, "E202"),
        (json.dumps({"sentences": [["a"] * 1001]}).encode(), 413, "E203"),
        (b'{"sentences": [["\\udc80"]]}', 422, "E208"),
    ]:
        got_status, _, got = server.request("POST", "/v1/embed", body, headers)
        assert (got_status, error_code(got)) == (status, code), got
    # a body too large, refused from its Content-Length before it is sent; then closed
    reply = raw_exchange(server.port, post_head(server.port, 10_000_000))
    assert reply.startswith(b"HTTP/1.1 413 ") and b"connection: close" in reply.lower()
    assert b"E201" in reply and b"limit of 65536 bytes" in reply
    # a body larger than it said, and one too large without a Content-Length
    reply = raw_exchange(server.port, post_head(server.port, 5) + b"[1, 2, 3, 4, 5]")
    assert reply.startswith(b"HTTP/1.1 4")
    chunked = (b"POST /v1/embed HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
               b"Transfer-Encoding: chunked\r\n\r\n")
    piece = b"x" * 40000
    reply = raw_exchange(server.port, chunked + b"%x\r\n%s\r\n" % (len(piece), piece) * 2
                         + b"0\r\n\r\n")
    assert reply.startswith(b"HTTP/1.1 413 ") and b"E201" in reply
    # clients that leave: mid-body, and right after sending a whole request
    for data in (post_head(server.port, 100) + b'{"sentences": [[',
                 post_head(server.port, 27) + b'{"sentences": [["a", "b"]]}'):
        with socket.create_connection(("127.0.0.1", server.port), timeout=30) as s:
            s.sendall(data)
    assert raw_exchange(server.port, b"NOT HTTP AT ALL\r\n\r\n").startswith(b"HTTP/1.1 400")
    after = server.embed({"sentences": [sentence]})["embeddings"][0]
    assert_close(after, np.asarray(before, dtype="float32"))
    assert server.request("GET", "/healthz")[0] == 200
    assert "Traceback" not in server.text() and "Exception in ASGI" not in server.text()


def test_sigterm_answers_the_request_in_flight_and_stops(server, embedded):
    sentence = embedded["sentences"][8]
    body = json.dumps({"sentences": [sentence]}).encode()
    in_flight = socket.create_connection(("127.0.0.1", server.port), timeout=60)
    in_flight.sendall(post_head(server.port, len(body)) + body[:10])
    server.request("GET", "/healthz")  # the half-sent request has reached the app
    server.process.send_signal(signal.SIGTERM)
    for _ in range(600):  # the server stops listening (bounded: 600 tries)
        try:
            socket.create_connection(("127.0.0.1", server.port), timeout=5).close()
        except ConnectionRefusedError:
            break
        time.sleep(0.05)
    else:
        pytest.fail("the server still accepts connections after SIGTERM")
    in_flight.sendall(body[10:])
    reply = b""
    while chunk := in_flight.recv(65536):
        reply += chunk
    in_flight.close()
    head, _, payload = reply.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 ")
    assert_close(json.loads(payload)["embeddings"][0], embedded["all"][8])
    assert server.process.wait(60) == 128 + signal.SIGTERM
    log = server.text()
    assert "Stopped by SIGTERM" in log and "Application shutdown complete" in log
    assert "Traceback" not in log
