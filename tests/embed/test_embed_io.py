"""`spacy-elmo embed` input and output: pipes and standard input, never over its own input,
an existing OUTPUT only with --overwrite, stopped runs leave nothing, messages on stderr."""

import os
import signal
import threading
import warnings

import h5py
import numpy as np
import pytest
from typer.testing import CliRunner

from spacy_elmo.bilm.embedder import Embedder
from spacy_elmo.cli import app
from spacy_elmo.embed.job import embed_file
from spacy_elmo.errors import ElmoError

from ..conftest import make_random_bilm

runner = CliRunner()
LINES = ["the cat sat", "", "a dog ran to the house", "hi"]


def text_file(tmp_path, lines=LINES):
    path = tmp_path / "in.txt"
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def stderr(result):
    return " ".join(result.stderr.split())


def read_output(path):
    with h5py.File(path, "r") as f:
        return {name: f[name][...] for name in f if name != "sentence_to_index"}


def test_a_pipe_is_read_once_and_fully(tmp_path, tiny_weights_dir):
    """A pipe (`/dev/stdin`, `<(xz -dc ...)`) can be read only once: the line count for
    the progress bar used to consume it, and 0 lines were written."""
    read_fd, write_fd = os.pipe()

    def feed():
        with os.fdopen(write_fd, "w", encoding="utf-8") as pipe:
            pipe.write("".join(line + "\n" for line in LINES))

    writer = threading.Thread(target=feed)
    writer.start()
    try:
        n = embed_file(f"/dev/fd/{read_fd}", tmp_path / "piped.hdf5",
                       weights=tiny_weights_dir, progress=True)
    finally:
        writer.join()
        os.close(read_fd)
    assert n == len(LINES)
    embed_file(text_file(tmp_path), tmp_path / "file.hdf5", weights=tiny_weights_dir)
    piped, plain = read_output(tmp_path / "piped.hdf5"), read_output(tmp_path / "file.hdf5")
    assert piped.keys() == plain.keys() and len(piped) == len(LINES)
    for name in plain:
        np.testing.assert_array_equal(piped[name], plain[name])


def test_dash_reads_standard_input(tmp_path, tiny_weights_dir):
    result = runner.invoke(app, ["embed", "-", str(tmp_path / "out.hdf5"), "--weights",
                                 str(tiny_weights_dir)], input="a b\nc\n")
    assert result.exit_code == 0, result.output
    assert [a.shape[1] for a in read_output(tmp_path / "out.hdf5").values()] == [2, 1]


def test_standard_input_redirected_from_a_file_is_read_once(tmp_path, tiny_weights_dir,
                                                            monkeypatch):
    """`embed - OUT < in.txt`: stdin is a regular file, but "-" is not a path to count."""
    with open(text_file(tmp_path), "rb") as redirected:
        monkeypatch.setattr("sys.stdin", os.fdopen(os.dup(redirected.fileno()), "r"))
        n = embed_file("-", tmp_path / "out.hdf5", weights=tiny_weights_dir)
    assert n == len(LINES)
    assert [a.shape[1] for a in read_output(tmp_path / "out.hdf5").values()] == [3, 0, 6, 1]


@pytest.mark.parametrize("setting,value,message", [
    ("batch_size", 0, "--batch-size must be a positive integer, got 0"),
    ("window", -1, "--window must be a positive integer, got -1"),
    ("word_cache", -2, "--word-cache must be an integer >= 0, got -2"),
])
def test_sizes_are_checked_before_the_biLM_is_loaded(tmp_path, setting, value, message):
    with pytest.raises(ElmoError, match=r"\[E020\] " + message):
        embed_file(text_file(tmp_path), tmp_path / "out.hdf5",
                   weights=tmp_path / "no_such_model", **{setting: value})


def test_output_never_replaces_the_input(tmp_path, tiny_weights_dir):
    """INPUT == OUTPUT destroyed the text; also through another name for the file."""
    text = text_file(tmp_path)
    before = text.read_bytes()
    os.link(text, tmp_path / "hardlink.txt")
    (tmp_path / "symlink.txt").symlink_to(text)
    for output in (text, tmp_path / "hardlink.txt", tmp_path / "symlink.txt"):
        result = runner.invoke(app, ["embed", str(text), str(output), "--weights",
                                     str(tiny_weights_dir), "--overwrite"])
        assert result.exit_code == 1, result.output
        assert "lies inside, one of this command's inputs" in stderr(result)
    assert text.read_bytes() == before


def test_existing_output_needs_overwrite(tmp_path, tiny_weights_dir):
    text = text_file(tmp_path)
    out = tmp_path / "out.hdf5"
    out.write_bytes(b"precious")
    args = ["embed", str(text), str(out), "--weights", str(tiny_weights_dir)]
    result = runner.invoke(app, args)
    assert result.exit_code == 1
    assert "already exists. Pass --overwrite" in stderr(result)
    assert result.stdout == ""  # errors go to stderr
    assert out.read_bytes() == b"precious"
    result = runner.invoke(app, [*args, "--overwrite"])
    assert result.exit_code == 0, result.output
    assert len(read_output(out)) == len(LINES)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_stopped_embed_leaves_nothing(tmp_path, tiny_weights_dir, monkeypatch, signum,
                                       default_sigint):
    """SIGTERM left a hidden temporary file as large as the output; now it and Ctrl-C
    exit 143/130 with a message, and leave neither the temporary file nor an output.
    (`default_sigint`: Ctrl-C as a terminal delivers it, also when the suite runs with
    SIGINT ignored.)"""
    text = text_file(tmp_path, [f"line {i}" for i in range(200)])
    original = Embedder._run
    calls = []

    def run_then_signal(self, batch, runner=None):
        calls.append(1)
        if len(calls) == 2:
            # where SIGTERM would kill this process (and the test run), fail instead
            assert signal.getsignal(signum) != signal.SIG_DFL, "no handler during the write"
            signal.raise_signal(signum)
        return original(self, batch, runner)

    monkeypatch.setattr(Embedder, "_run", run_then_signal)
    result = runner.invoke(app, ["embed", str(text), str(tmp_path / "out.hdf5"), "--weights",
                                 str(tiny_weights_dir), "--batch-size", "8"])
    assert result.exit_code == 128 + signum, result.output
    assert "nothing was written" in stderr(result)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.txt"]


def test_cut_tokens_are_reported_once(tmp_path, tiny_weights_dir):
    """The component warned about tokens cut at the byte budget; `embed` did not."""
    embedder = Embedder(make_random_bilm(), batch_size=1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        list(embedder.embed([["ok", "x" * 60], ["y" * 60]]))
    assert [str(w.message)[:52] for w in caught] == [
        "[W002] 1 token(s) are longer than this biLM's budget"]
    with pytest.warns(UserWarning, match="budget of 48 UTF-8 bytes"):
        embed_file(text_file(tmp_path, ["a " + "é" * 40]), tmp_path / "o.hdf5",
                   weights=tiny_weights_dir, progress=False)
