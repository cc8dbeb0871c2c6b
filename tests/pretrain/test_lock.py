"""One writer per run directory: a second `pretrain` (new, --overwrite or --resume) or an
export into the run is refused naming the holder; readers keep working; the lock goes with
its holder however it ends, and a holder killed with SIGKILL leaves a stale lock that the
next run takes over."""

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from spacy_elmo.cli import app
from spacy_elmo.errors import ElmoError
from spacy_elmo.files.lock import DirectoryLock
from spacy_elmo.files.names import LOCK_NAME
from spacy_elmo.pretrain import trainer as trainer_module
from spacy_elmo.pretrain.checkpoint import load_checkpoint
from spacy_elmo.pretrain.trainer import Trainer, train

from .conftest import TINY_OPTIONS, tiny_config, write_corpus

ROOT = Path(__file__).resolve().parents[2]
runner = CliRunner()


@pytest.fixture(autouse=True)
def no_curves(monkeypatch):
    monkeypatch.setattr(trainer_module, "draw_curves", lambda metrics, png: True)


def quick(tmp_path, **changes):
    return tiny_config(tmp_path, **{"dev": [], "max_steps": 4, "checkpoint_every": 2,
                                    "log_every": 1, **changes})


def start_pretrain(tmp_path: Path, out: Path) -> subprocess.Popen:
    """A real `spacy-elmo pretrain` in another process, running until it is stopped."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1",
               OMP_WAIT_POLICY="PASSIVE")
    return subprocess.Popen(
        [sys.executable, "-m", "spacy_elmo", "pretrain", str(tmp_path / "corpus.txt"),
         "--output", str(out), "--max-steps", "1000000", "--checkpoint-every", "2",
         "--options", json.dumps(TINY_OPTIONS), "--vocab-size", "40", "--n-negatives", "8",
         "--batch-size", "4", "--window", "6", "--shuffle-buffer", "30", "--threads", "1"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def wait_for(path: Path, proc: subprocess.Popen, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists():
        if proc.poll() is not None:
            raise AssertionError(f"pretrain ended: {proc.stderr.read() if proc.stderr else ''}")
        assert time.monotonic() < deadline, f"{path} did not appear"
        time.sleep(0.2)


def test_a_second_writer_is_refused_readers_work_and_a_killed_holder_is_taken_over(
        tmp_path):
    """Two `pretrain` processes on one --output both exited 0, their metrics.jsonl
    interleaved and model/ held one of them."""
    write_corpus(tmp_path / "corpus.txt")
    out = tmp_path / "run"
    proc = start_pretrain(tmp_path, out)
    try:
        wait_for(out / "checkpoint.pt", proc)
        holder = f"process {proc.pid} on host {socket.gethostname()}"
        for kwargs in ({"resume": True}, {"overwrite": True}):
            with pytest.raises(ElmoError, match=rf"\[E071\] '{out}' is in use by another "
                                                rf"writer \({holder}, since "):
                train(quick(tmp_path), progress=False, **kwargs)
        result = runner.invoke(app, ["export", str(out), str(out / "model"), "--overwrite"])
        assert result.exit_code == 1 and "[E071]" in result.stderr
        assert not (out / "model").exists()
        # readers: an export into another directory, and the run's files
        result = runner.invoke(app, ["export", str(out), str(tmp_path / "export")])
        assert result.exit_code == 0, result.output
        assert load_checkpoint(out)["step"] >= 2
        assert proc.poll() is None  # the holder was not disturbed
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    record = json.loads((out / LOCK_NAME).read_text())
    assert record["pid"] == proc.pid  # left behind by the killed holder: stale
    with pytest.warns(UserWarning, match=rf"\[W017\] The lock .* was left by process "
                                         rf"{proc.pid} on host .*taking it over"):
        result = train(quick(tmp_path, max_steps=load_checkpoint(out)["step"] + 2),
                       resume=True, progress=False)
    assert not result.stopped
    assert (out / LOCK_NAME).read_text() == ""  # released: nothing stale


def test_the_lock_is_released_on_an_exception_and_on_a_signal(tmp_path, monkeypatch):
    out = tmp_path / "run"
    original = Trainer.train_step

    def crash_at_3(self):
        loss = original(self)
        if self.step == 3:
            raise RuntimeError("out of memory")
        return loss

    with monkeypatch.context() as patch:
        patch.setattr(Trainer, "train_step", crash_at_3)
        with pytest.raises(RuntimeError):
            train(quick(tmp_path), progress=False)

    def signal_at_5(self):
        loss = original(self)
        if self.step == 5:
            signal.raise_signal(signal.SIGTERM)
        return loss

    with monkeypatch.context() as patch:
        patch.setattr(Trainer, "train_step", signal_at_5)
        assert train(quick(tmp_path, max_steps=8), resume=True, progress=False).stopped
    assert (out / LOCK_NAME).read_text() == ""
    with DirectoryLock(out) as lock:  # free: nobody holds it, nothing stale
        assert lock.held
        with pytest.raises(ElmoError, match=r"\[E071\].*process \d+ on host"):
            train(quick(tmp_path, max_steps=8), resume=True, progress=False)
    assert train(quick(tmp_path, max_steps=8), resume=True, progress=False).step == 8


def test_a_failed_start_in_a_new_directory_leaves_nothing(tmp_path):
    with pytest.raises(ElmoError):
        train(quick(tmp_path, n_negatives=500), progress=False)
    assert not (tmp_path / "run").exists()


TAKE = """
import sys, time, warnings
from spacy_elmo.errors import ElmoError
from spacy_elmo.files.lock import DirectoryLock
warnings.simplefilter("always")
try:
    with DirectoryLock(sys.argv[1]) as lock:
        print("held" if lock.held else "no lock", flush=True)
        time.sleep(float(sys.argv[2]))
except ElmoError as err:
    print(err, flush=True)
    sys.exit(1)
"""


def take_in_a_process(directory: Path, hold: float) -> subprocess.Popen:
    """Another process that takes `directory`'s lock and holds it for `hold` seconds."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    return subprocess.Popen([sys.executable, "-c", TAKE, str(directory), str(hold)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_one_process_holds_the_lock_and_a_killed_holder_frees_it(tmp_path):
    """Between real processes: a second one is refused (E071, naming the holder); after
    kill -9 of the holder, the next one takes the lock over (W017) and frees it when done."""
    holder = take_in_a_process(tmp_path, 600)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        second = take_in_a_process(tmp_path, 0)
        out, _ = second.communicate(timeout=120)
        assert second.returncode == 1
        assert out.startswith(f"[E071] '{tmp_path}' is in use by another writer (process "
                              f"{holder.pid} on host {socket.gethostname()}, since "), out
        assert holder.poll() is None
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=30)
    assert json.loads((tmp_path / LOCK_NAME).read_text())["pid"] == holder.pid
    third = take_in_a_process(tmp_path, 0)
    out, err = third.communicate(timeout=120)
    assert third.returncode == 0 and out.strip() == "held", out + err
    assert f"[W017] The lock '{tmp_path / LOCK_NAME}' was left by process {holder.pid}" in err
    assert (tmp_path / LOCK_NAME).read_text() == ""
