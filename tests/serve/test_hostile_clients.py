"""Clients that hold what they should not: connections past the limit, idle or half-sent
requests, answers never read, bodies over the limit sent whole, keep-alive clients during a
stop, and a process out of files. A real server (uvicorn) in a child process, small limits."""

import http.client
import json
import resource
import signal
import socket
import time
import urllib.error
import urllib.request

import pytest

from .test_server import Server, post_head

pytest.importorskip("fastapi", reason="the serve extra is not installed")
pytest.importorskip("uvicorn", reason="the serve extra is not installed")

SENTENCE = ["The", "bank", "raised", "rates", "."]


def recv_all(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection."""
    chunks = []
    while chunk := sock.recv(65536):
        chunks.append(chunk)
    return b"".join(chunks)


def stats(server: Server) -> dict:
    return json.loads(server.request("GET", "/v1/info")[2])["stats"]


def embed_body(sentences) -> bytes:
    return json.dumps({"sentences": sentences}).encode()


def wait_until(check, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"not within {seconds} s: {what}")
        time.sleep(0.05)


@pytest.fixture(scope="module")
def guarded(tmp_path_factory):
    running = Server(tmp_path_factory.mktemp("guarded"), "--max-connections", "6",
                     "--header-timeout", "2", "--body-timeout", "2",
                     "--keep-alive-timeout", "1", "--send-timeout", "2",
                     "--max-request-bytes", "1000000", "--max-tokens", "16000",
                     "--max-sentences", "64", "--max-batch-tokens", "16200",
                     "--no-access-log")
    yield running
    running.stop()


def test_connections_past_the_limit_get_a_503_they_can_read(guarded):
    idle = [socket.create_connection(("127.0.0.1", guarded.port), timeout=10)
            for _ in range(6)]
    try:
        time.sleep(0.2)
        with socket.create_connection(("127.0.0.1", guarded.port), timeout=10) as extra:
            extra.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            reply = recv_all(extra)
    finally:
        for s in idle:
            s.close()
    assert reply.startswith(b"HTTP/1.1 503 ") and b"connection: close" in reply.lower()
    assert b"E281" in reply and b"--max-connections 6" in reply
    log = guarded.text()
    assert "[W033] Refused 1 connection(s)" in log and "Traceback" not in log
    wait_until(lambda: guarded.request("GET", "/healthz")[0] == 200, 10, "served again")


def test_idle_and_half_sent_connections_are_closed_in_time(guarded):
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", guarded.port), timeout=10) as idle, \
            socket.create_connection(("127.0.0.1", guarded.port), timeout=10) as slow:
        request = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: "
        for byte in request[:12]:  # slowloris: a byte now and then, headers never done
            slow.sendall(bytes([byte]))
            time.sleep(0.1)
        assert recv_all(idle) == b""  # closed, no answer: it asked nothing
        reply = recv_all(slow)
    assert time.monotonic() - started < 8
    assert reply.startswith(b"HTTP/1.1 408 ") and b"E282" in reply
    assert b"--header-timeout" in reply
    # a body that stops coming: 408 after --body-timeout
    body = embed_body([SENTENCE])
    with socket.create_connection(("127.0.0.1", guarded.port), timeout=10) as sock:
        sock.sendall(post_head(guarded.port, len(body)) + body[:5])
        reply = recv_all(sock)
    assert reply.startswith(b"HTTP/1.1 408 ") and b"--body-timeout" in reply


def test_an_answer_never_read_is_dropped_after_the_send_timeout(guarded):
    """A client that sends a request with a large answer and never reads: the server drops
    the answer and the connection after --send-timeout (W034), and others are served."""
    before = stats(guarded)["send_timeouts"]
    body = embed_body([["word"] * 250] * 64)  # 16,000 tokens: about 20 MB of JSON
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.settimeout(60)
    sock.connect(("127.0.0.1", guarded.port))
    try:
        sock.sendall(post_head(guarded.port, len(body)) + body)
        wait_until(lambda: stats(guarded)["send_timeouts"] > before, 60,
                   "the unread answer dropped")
        assert guarded.request("GET", "/healthz")[0] == 200
    finally:
        sock.close()
    info = stats(guarded)
    assert info["answers_in_flight"] == 0
    assert "[W034] Closed 1 connection(s)" in guarded.text()


def test_a_python_client_reads_the_413_of_a_body_over_the_limit(guarded):
    """urllib (as requests) sends the whole body before it reads: the server lingers,
    reading and dropping it, so the client gets its 413 instead of a reset."""
    request = urllib.request.Request(
        f"http://127.0.0.1:{guarded.port}/v1/embed", data=b"x" * 5_000_000,
        headers={"Content-Type": "application/json"}, method="POST")
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(request, timeout=60)
    assert caught.value.code == 413
    assert json.loads(caught.value.read())["error"]["code"] == "E201"


def test_keep_alive_clients_get_answers_never_resets_across_a_stop(tmp_path):
    server = Server(tmp_path, "--keep-alive-timeout", "3", "--no-access-log")
    try:
        clients = [http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
                   for _ in range(8)]
        body = embed_body([SENTENCE])
        headers = {"Content-Type": "application/json"}
        for client in clients:
            client.request("POST", "/v1/embed", body, headers)
            response = client.getresponse()
            response.read()
            assert response.status == 200 and response.getheader("connection") is None
        server.process.send_signal(signal.SIGTERM)
        wait_until(lambda: "Shutting down" in server.text(), 30, "the stop began")
        for client in clients:  # the same kept-alive connections, after the stop began
            client.request("POST", "/v1/embed", body, headers)
            response = client.getresponse()
            answer = json.loads(response.read())
            assert response.status == 503 and answer["error"]["code"] == "E216"
            assert response.getheader("connection") == "close"
            client.close()
        assert server.process.wait(60) == 128 + signal.SIGTERM
    finally:
        server.stop()
    assert "Traceback" not in server.text()


def _files_256() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))


def test_out_of_files_the_server_refuses_in_one_line_and_recovers(tmp_path):
    """Under `ulimit -n 256`, 300 connections that send nothing: the limit is lowered to
    what the files allow (W040), the rest are refused (W033), nothing raises EMFILE, and a
    normal request is served once the idle ones time out."""
    server = Server(tmp_path, "--header-timeout", "2", "--no-access-log",
                    preexec_fn=_files_256)
    idle = []
    try:
        for _ in range(300):
            try:
                idle.append(socket.create_connection(("127.0.0.1", server.port), timeout=10))
            except OSError:  # this process's own files (the test's limit is its own)
                break
        time.sleep(0.5)
        assert server.process.poll() is None

        def served() -> bool:
            try:
                return server.request("GET", "/healthz")[0] == 200
            except OSError:
                return False

        wait_until(served, 20, "a normal request served")
    finally:
        for s in idle:
            s.close()
        server.stop()
    log = server.text()
    assert "[W040] --max-connections 512 lowered to 160" in log
    assert "[W033] Refused" in log
    assert "Too many open files" not in log and "Traceback" not in log
