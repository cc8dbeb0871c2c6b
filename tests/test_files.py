"""Atomic writes: nothing half-written, no temporary file left on any path (exceptions,
signals, SIGKILL, a full disk), and a full disk reported as such."""

import errno
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pytest

from spacy_elmo.errors import ElmoError
from spacy_elmo.files import atomic as atomic_module
from spacy_elmo.files.atomic import DiskFull, atomic_directory, atomic_write, sweep_stale
from spacy_elmo.files.hdf5 import HDF5Writer
from spacy_elmo.files.lock import DirectoryLock
from spacy_elmo.files.names import LOCK_NAME
from spacy_elmo.files.signals import Terminated

ROOT = Path(__file__).resolve().parents[1]


def python(code: str, **kwargs) -> subprocess.Popen:
    """A Python subprocess that imports this checkout's package."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_WAIT_POLICY="PASSIVE")
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            **kwargs)


def temps(directory: Path):
    return sorted(p.name for p in directory.iterdir() if p.name.startswith(".tmp-"))


def test_exception_leaves_the_old_file_and_no_temp(tmp_path):
    target = tmp_path / "out.txt"
    target.write_text("old")
    with pytest.raises(KeyError):
        with atomic_write(target) as tmp:
            tmp.write_text("new")
            raise KeyError("boom")
    assert target.read_text() == "old" and temps(tmp_path) == []


def test_signals_sigkill_and_a_full_device_in_a_real_process(tmp_path):
    """One subprocess (Python with torch takes seconds to start):
    - HDF5 cannot recover from a failed write (on a full disk it crashed the process in
      close): on /dev/full the writer keeps the error from it and raises it after a clean
      close;
    - a process SIGKILLed during a write leaves its temporary file; the next write into
      that directory removes it, but not a live process's file, nor one it cannot
      attribute;
    - SIGTERM, which kills at once by default, raises during a write instead: the
      temporary file goes and the exit status is still 143."""
    runs, other = tmp_path / "run", tmp_path / "other"
    runs.mkdir()
    other.mkdir()
    proc = python(f"""
        import errno, os, signal, time
        from pathlib import Path
        import numpy as np
        from spacy_elmo.files.atomic import atomic_write
        from spacy_elmo.files.hdf5 import HDF5Writer
        try:
            with HDF5Writer(Path("/dev/full")) as out:
                for i in range(200):
                    out.file.create_dataset(str(i), data=np.zeros((3, 20, 12), "float32"))
                    out.check()
        except OSError as err:
            print("full", err.errno == errno.ENOSPC, flush=True)
        pid = os.fork()
        if pid == 0:
            with atomic_write(Path({str(runs / "checkpoint.pt")!r}), ".pt") as tmp:
                tmp.write_bytes(b"x" * 1000)
                os.kill(os.getpid(), signal.SIGKILL)
        os.waitpid(pid, 0)
        with atomic_write(Path({str(other / "out.bin")!r})) as tmp:
            tmp.write_bytes(b"x" * 1000)
            print("writing", flush=True)
            time.sleep(60)
    """)
    assert proc.stdout is not None
    first = proc.stdout.readline().strip()
    if os.path.exists("/dev/full"):
        assert first == "full True"
        first = proc.stdout.readline().strip()
    assert first == "writing"
    [stale] = temps(runs)
    assert len(temps(other)) == 1
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 143
    assert temps(other) == [] and not (other / "out.bin").exists()
    foreign = runs / ".tmp-abcdefgh.pt"  # an older layout: not attributable
    foreign.write_bytes(b"?")
    with atomic_write(runs / "live.txt") as mine:  # this process is alive
        mine.write_text("x")
        sweep_stale(runs)
        assert mine.exists()
    with atomic_write(runs / "checkpoint.pt", ".pt") as tmp:
        tmp.write_bytes(b"new")
    assert temps(runs) == [foreign.name]
    assert (runs / "checkpoint.pt").read_bytes() == b"new"


def test_terminated_is_an_exit_with_the_shell_status():
    assert Terminated(signal.SIGTERM).code == 143
    assert issubclass(Terminated, SystemExit)


def test_disk_full_is_reported_and_the_temp_removed(tmp_path):
    """A write that fails with ENOSPC, as torch.save does on a full disk (a RuntimeError
    raised while handling the OSError), says the disk is full."""
    target = tmp_path / "checkpoint.pt"
    target.write_bytes(b"previous")
    with pytest.raises(DiskFull, match=r"the disk is full \(No space left on device; .* "
                                       r"free in .*Nothing was replaced"):
        with atomic_write(target, ".pt") as tmp:
            tmp.write_bytes(b"partial")
            try:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            except OSError:
                raise RuntimeError("unexpected pos 704 vs 598")  # noqa: B904
    assert target.read_bytes() == b"previous" and temps(tmp_path) == []


def test_writer_reports_the_first_failed_write(tmp_path):
    with pytest.raises(OSError, match="No space"):
        with HDF5Writer(tmp_path / "x.hdf5") as out:
            out.file.create_dataset("a", data=np.zeros(3))
            out._raw.error = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            out.file.create_dataset("b", data=np.zeros(3))


def _can_mount_tmpfs() -> bool:
    if shutil.which("unshare") is None or not sys.platform.startswith("linux"):
        return False
    result = subprocess.run(["unshare", "-m", "sh", "-c",
                             "mount -t tmpfs -o size=64k tmpfs /mnt"],
                            capture_output=True, check=False)
    return result.returncode == 0


def test_real_full_disk_embed_and_checkpoint(tmp_path, tiny_weights_dir):
    """On a real 512 KB filesystem (a tmpfs in a private mount namespace): `embed` and a
    checkpoint fail with the disk-full error and leave no temporary file."""
    if not _can_mount_tmpfs():
        pytest.skip("cannot mount a small tmpfs here (needs unshare and mount rights)")
    text = tmp_path / "in.txt"
    text.write_text("".join(f"sentence number {i} with some words .\n" for i in range(1000)))
    code = tmp_path / "full.py"
    code.write_text(textwrap.dedent(f"""
        import torch
        from pathlib import Path
        from spacy_elmo.cli import app
        from spacy_elmo.errors import ElmoError
        from spacy_elmo.pretrain.checkpoint import save_checkpoint
        try:
            app(["embed", "{text}", "/mnt/out.hdf5", "--weights", "{tiny_weights_dir}"])
        except SystemExit as exit:
            print("embed rc", exit.code, flush=True)
        try:
            save_checkpoint(Path("/mnt/checkpoint.pt"), {{"w": torch.zeros(1_000_000)}})
        except ElmoError as err:
            print("checkpoint:", err)
        import os
        print("left:", os.listdir("/mnt"))
    """))
    script = f"mount -t tmpfs -o size=512k tmpfs /mnt && '{sys.executable}' {code}"
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_WAIT_POLICY="PASSIVE")
    result = subprocess.run(["unshare", "-m", "sh", "-c", script], capture_output=True,
                            text=True, env=env, timeout=300, check=False)
    out = " ".join(result.stdout.split())
    err = " ".join(result.stderr.split())
    assert "embed rc 1" in out, result.stdout + result.stderr
    assert "Cannot write '/mnt/out.hdf5': the disk is full" in err
    assert "checkpoint: [E024] Cannot write '/mnt/checkpoint.pt': the disk is full" in out
    assert out.endswith("left: []"), out  # no output, no temporary file


def test_signal_handlers_are_restored_and_a_programs_own_kept(tmp_path):
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
    with atomic_write(tmp_path / "a") as tmp:
        tmp.write_text("x")
        assert signal.getsignal(signal.SIGTERM) != signal.SIG_DFL
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL

    def own(signum, frame):
        pass

    previous = signal.signal(signal.SIGTERM, own)
    try:
        with atomic_write(tmp_path / "b") as tmp:
            assert signal.getsignal(signal.SIGTERM) is own
            tmp.write_text("x")
    finally:
        signal.signal(signal.SIGTERM, previous)


@pytest.mark.parametrize("exchange", [True, False])
def test_atomic_directory_replaces_a_directory_whole_or_not_at_all(tmp_path, monkeypatch,
                                                                    exchange):
    """Exports and snapshots renamed temporary files themselves (issue 28 item 6)."""
    if not exchange:  # systems without renameat2: the old one is renamed aside a moment
        monkeypatch.setattr(atomic_module, "_exchange", lambda first, second: False)
    target = tmp_path / "model"
    with atomic_directory(target) as tmp:
        (tmp / "a.txt").write_text("one")
        (tmp / "b.txt").write_text("one")
        assert not target.exists()
    assert sorted(p.name for p in target.iterdir()) == ["a.txt", "b.txt"]
    with pytest.raises(KeyError):
        with atomic_directory(target) as tmp:
            (tmp / "a.txt").write_text("two")
            raise KeyError("boom")
    assert (target / "a.txt").read_text() == "one" and temps(tmp_path) == []
    with atomic_directory(target) as tmp:
        (tmp / "a.txt").write_text("three")
        assert (target / "b.txt").exists()  # the old one stays until the new is complete
    assert sorted(p.name for p in target.iterdir()) == ["a.txt"]
    assert (target / "a.txt").read_text() == "three"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model"]
    mode = target.stat().st_mode & 0o777
    umask = os.umask(0)
    os.umask(umask)
    assert mode == 0o777 & ~umask


def test_atomic_directory_sweeps_the_directory_of_a_killed_writer(tmp_path):
    proc = python(f"""
        import os, signal
        from pathlib import Path
        from spacy_elmo.files.atomic import atomic_directory
        with atomic_directory(Path({str(tmp_path / "model")!r})) as tmp:
            (tmp / "weights.hdf5").write_bytes(b"x" * 100)
            os.kill(os.getpid(), signal.SIGKILL)
    """)
    assert proc.wait(timeout=120) == -signal.SIGKILL
    assert len(temps(tmp_path)) == 1
    with atomic_directory(tmp_path / "model") as tmp:
        (tmp / "weights.hdf5").write_bytes(b"y")
    assert temps(tmp_path) == [] and (tmp_path / "model" / "weights.hdf5").read_bytes() == b"y"


def test_a_directory_lock_has_one_holder_at_a_time(tmp_path):
    with DirectoryLock(tmp_path) as lock:
        assert lock.held
        record = json.loads((tmp_path / LOCK_NAME).read_text())
        assert record["pid"] == os.getpid()
        with pytest.raises(ElmoError, match=rf"\[E071\] '{tmp_path}' is in use by another "
                                            rf"writer \(process {os.getpid()} on host "):
            DirectoryLock(tmp_path).acquire()
        lock.acquire()  # held already: nothing happens
    assert (tmp_path / LOCK_NAME).read_text() == ""
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # free again, and not stale: no W017
        with DirectoryLock(tmp_path):
            pass


def test_a_link_to_nothing_at_the_output_counts_as_existing(tmp_path):
    """A dangling symbolic link was replaced by a regular file without --overwrite."""
    from spacy_elmo.files.guard import guard_output

    link = tmp_path / "out.spacy"
    link.symlink_to(tmp_path / "nowhere" / "x.spacy")
    with pytest.raises(ElmoError, match=r"\[E026\]"):
        guard_output(link, overwrite=False)
    assert guard_output(link, overwrite=True) == link


def test_writes_go_through_a_symbolic_link_to_its_target(tmp_path):
    """`export RUN LINK --overwrite` replaced the link with a directory and left its target,
    where the user's pipelines point, as it was: a link is written through."""
    target = tmp_path / "keep" / "model"
    target.mkdir(parents=True)
    (target / "old.txt").write_text("old")
    link = tmp_path / "current"
    link.symlink_to(target)
    with atomic_directory(link) as tmp:
        (tmp / "new.txt").write_text("new")
    assert link.is_symlink() and link.resolve() == target.resolve()
    assert sorted(p.name for p in target.iterdir()) == ["new.txt"]
    file_target = tmp_path / "keep" / "vectors.txt"
    file_target.write_text("old")
    file_link = tmp_path / "vectors.txt"
    file_link.symlink_to(file_target)
    with atomic_write(file_link) as tmp:
        tmp.write_text("new")
    assert file_link.is_symlink() and file_target.read_text() == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["current", "keep", "vectors.txt"]
