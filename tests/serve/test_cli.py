"""`spacy-elmo serve`'s own checks, all made before the model loads: settings out of range
or of the wrong kind, and an address the server cannot listen on."""

import socket

import pytest
from typer.testing import CliRunner

from spacy_elmo.cli import app
from spacy_elmo.errors import ElmoError
from spacy_elmo.serve.run import check_listen

from .conftest import OPTIONS, WEIGHTS

pytest.importorskip("fastapi", reason="the serve extra is not installed")
pytest.importorskip("uvicorn", reason="the serve extra is not installed")

runner = CliRunner()


def serve(*args: str):
    return runner.invoke(app, ["serve", str(WEIGHTS), "--options", str(OPTIONS), *args])


def flat(text: str) -> str:
    return " ".join(text.split())


@pytest.mark.parametrize("args,words", [
    (["--threads", "0"], "--threads must be an integer in [1, 1024] or null, got 0"),
    (["--threads", "100000"], "--threads must be an integer in [1, 1024] or null, got 100000"),
    (["--log-level", "verbose"], "--log-level must be one of ['critical', 'error', 'warning', "
                                 "'info', 'debug', 'trace'], got 'verbose'"),
    (["--max-json-values", "0"], "--max-json-values must be a positive integer, got 0"),
    (["--max-tokens", "-5"], "--max-tokens must be a positive integer, got -5"),
])
def test_settings_out_of_range_are_refused_before_the_model_loads(args, words):
    result = serve(*args, "--port", "0")
    assert result.exit_code == 1
    assert "[E020]" in flat(result.output) and words in flat(result.output), result.output


def test_a_port_in_use_is_refused_before_the_model_loads():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(ElmoError, match=rf"\[E272\] Cannot serve on 127.0.0.1:{port}"):
            check_listen("127.0.0.1", port)
        result = serve("--port", str(port))
    assert result.exit_code == 1 and "[E272]" in result.output
    assert "another --port" in flat(result.output)


def test_a_host_that_is_not_this_machine_is_refused():
    with pytest.raises(ElmoError, match=r"\[E272\] Cannot serve on no-such-host.invalid:8080"):
        check_listen("no-such-host.invalid", 8080)


def test_a_free_port_passes():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    check_listen("127.0.0.1", port)  # nothing listens there now
