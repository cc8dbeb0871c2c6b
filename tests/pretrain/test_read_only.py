"""Run directories that cannot be written (a read-only directory or file system) or hold
something odd (a directory at `.lock`): a catalogue error in one line, never a traceback,
and nothing changed."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from spacy_elmo.pretrain.trainer import train

from .conftest import tiny_config

ROOT = Path(__file__).resolve().parents[2]
# runs every command of the JSON file argv[1] in one Python, as the other CLI tests do
# (CliRunner), printing a marker, what the command wrote (stdout and stderr), any traceback
# and the exit status
DRIVER = """
import json, sys, traceback
from typer.testing import CliRunner
from spacy_elmo.cli import app
for i, args in enumerate(json.load(open(sys.argv[1], encoding="utf-8"))):
    result = CliRunner().invoke(app, args)
    print(f"=== {i}", result.output)
    if result.exc_info and not isinstance(result.exception, SystemExit):
        traceback.print_exception(*result.exc_info, file=sys.stdout)
    print(f"rc={result.exit_code}")
"""


def _read_only_runner(directories):
    """A way to run shell commands with `directories` read-only: a read-only bind mount in a
    private mount namespace (root ignores permissions), else the permissions; None where
    neither works."""
    if os.geteuid() != 0:
        return "", lambda: [os.chmod(d, 0o555) for d in directories]
    if shutil.which("unshare") is None:
        return None
    mounts = " && ".join(f"mount --bind '{d}' '{d}' && mount -o remount,ro,bind '{d}' '{d}'"
                         for d in directories)
    probe = subprocess.run(["unshare", "-m", "sh", "-c", mounts], capture_output=True)
    return (f"{mounts} && ", None) if probe.returncode == 0 else None


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("read_only")
    train(tiny_config(tmp, max_steps=2, checkpoint_every=2, dev=[]), progress=False)
    return tmp / "run"


def test_read_only_and_odd_run_directories_are_one_line_errors(run, tmp_path):
    """`pretrain --output RO --resume`, `export RO RO/model --overwrite`, `export RUN
    RO/exp`, `init-pretrain-config RO/a.cfg`: OSError tracebacks; a directory at `.lock`:
    IsADirectoryError."""
    ro_run, plain, odd = tmp_path / "ro_run", tmp_path / "plain", tmp_path / "odd"
    shutil.copytree(run, ro_run)
    shutil.copytree(run, odd)
    (odd / ".lock").unlink()
    (odd / ".lock").mkdir()
    plain.mkdir()
    runner = _read_only_runner([ro_run, plain])
    if runner is None:
        pytest.skip("cannot make a directory read-only here (root without mount rights)")
    prefix, chmod = runner
    if chmod is not None:
        chmod()
    cases = [
        (["pretrain", "--output", ro_run, "--resume", "--max-steps", "4"], "E170",
         "the directory must be writable"),
        (["export", ro_run, ro_run / "model", "--overwrite"], "E170", "must be writable"),
        (["export", run, plain / "exp"], "E009", "Cannot write"),
        (["init-pretrain-config", plain / "a.cfg"], "E009", "Cannot write"),
        (["init-pretrain-config", plain / "x" / "a.cfg"], "E009", "Cannot write"),
        (["pretrain", run.parent / "corpus.txt", "--output", plain / "run", "--options",
          '{"lstm_dim": 16, "projection_dim": 8, "filters": [[1, 4], [2, 4], [3, 8]], '
          '"char_embed_dim": 4, "n_highway": 1}', "--vocab-size", "40", "--n-negatives", "8",
          "--max-steps", "2"], "E009", "Cannot write"),
        (["pretrain", "--output", odd, "--resume", "--max-steps", "4"], "E170",
         "must be a file: remove"),
        (["export", odd, odd / "model", "--overwrite"], "E170", "must be a file"),
    ]
    before = {p: p.stat().st_mtime_ns for d in (ro_run, odd) for p in d.rglob("*")}
    driver, commands = tmp_path / "driver.py", tmp_path / "commands.json"
    driver.write_text(DRIVER, encoding="utf-8")
    commands.write_text(json.dumps([[str(a) for a in args] for args, _, _ in cases]),
                        encoding="utf-8")
    script = f"'{sys.executable}' '{driver}' '{commands}' 2>&1"
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    done = subprocess.run(["unshare", "-m", "sh", "-c", prefix + script] if prefix
                          else ["sh", "-c", script], capture_output=True, text=True,
                          env=env, timeout=600)
    parts = done.stdout.split("=== ")[1:]
    assert len(parts) == len(cases), done.stdout + done.stderr
    for part, (args, code, words) in zip(parts, cases, strict=True):
        text = " ".join(part.split())
        assert f"[{code}]" in text and words in text, (args, text)
        assert "Traceback" not in text and text.endswith("rc=1"), (args, text)
    assert {p: p.stat().st_mtime_ns for d in (ro_run, odd) for p in d.rglob("*")} == before
    assert list(plain.iterdir()) == []
