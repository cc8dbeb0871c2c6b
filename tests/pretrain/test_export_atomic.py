"""Exports and snapshots are written whole: a failure leaves the previous export as it was
and no temporary directory; `export` never writes over its checkpoint's run or over files
that are not an export's."""

import pytest
from typer.testing import CliRunner

from spacy_elmo.cli import app
from spacy_elmo.errors import ElmoError
from spacy_elmo.pretrain import export as export_module
from spacy_elmo.pretrain import trainer as trainer_module
from spacy_elmo.pretrain.export import export
from spacy_elmo.pretrain.trainer import train

from .conftest import tiny_config

runner = CliRunner()


def files(directory):
    return {p.relative_to(directory): p.read_bytes() for p in directory.rglob("*")
            if p.is_file()}


def temps(directory):
    return [p.name for p in directory.iterdir() if p.name.startswith(".tmp-")]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("export_atomic")
    train(tiny_config(tmp, dev=[], max_steps=2, checkpoint_every=2), progress=False)
    return tmp / "run"


def test_a_failure_mid_export_keeps_the_previous_export(run, tmp_path, monkeypatch):
    """export wrote options.json and weights.hdf5 in place and then failed on the softmax:
    the directory held the new biLM beside the old softmax."""
    target = tmp_path / "export"
    export(run, target)
    before = files(target)
    (target / "options.json").write_text('{"mark": "old export"}')  # tell old from new
    before = files(target)
    original = export_module.write_hdf5

    def fail_on_softmax(path, arrays):
        if path.name == "softmax.hdf5":
            raise OSError(28, "No space left on device")
        original(path, arrays)

    monkeypatch.setattr(export_module, "write_hdf5", fail_on_softmax)
    with pytest.raises(ElmoError, match="disk is full"):
        export(run, target, overwrite=True)
    assert files(target) == before
    assert temps(tmp_path) == []
    monkeypatch.undo()
    export(run, target, overwrite=True)
    assert files(target) != before and temps(tmp_path) == []
    assert sorted(p.name for p in target.iterdir()) == [
        "options.json", "softmax.hdf5", "vocab.txt", "weights.hdf5"]


def test_a_failed_snapshot_leaves_no_temporary_directory(tmp_path, monkeypatch):
    """Snapshots were renamed from `step_N.tmp`, which a crash left behind."""
    monkeypatch.setattr(trainer_module, "draw_curves", lambda metrics, png: True)
    original = export_module.write_hdf5
    calls = []

    def fail_second_snapshot(path, arrays):
        calls.append(path)
        if len(calls) == 2:  # the softmax of the second snapshot
            raise RuntimeError("interrupted")
        original(path, arrays)

    monkeypatch.setattr(export_module, "write_hdf5", fail_second_snapshot)
    with pytest.raises(RuntimeError):
        train(tiny_config(tmp_path, dev=[], max_steps=4, checkpoint_every=2,
                          snapshot_every=2), progress=False)
    snapshots = tmp_path / "run" / "snapshots"
    assert sorted(p.name for p in snapshots.iterdir()) == ["step_0000002"]
    assert sorted(p.name for p in (snapshots / "step_0000002").iterdir()) == [
        "dev.json", "options.json", "softmax.hdf5", "vocab.txt", "weights.hdf5"]


@pytest.mark.parametrize("where", [".", "..", "checkpoint.pt"])
def test_export_never_writes_over_its_own_run(run, where):
    """With an export replacing its directory whole, the run directory (or one above it)
    as OUTPUT would have gone; the checkpoint itself as OUTPUT, too."""
    before = files(run)
    target = (run / where) if where != ".." else run.parent
    result = runner.invoke(app, ["export", str(run), str(target), "--overwrite"])
    assert result.exit_code == 1
    assert "[E025]" in result.stderr or "[E028]" in result.stderr, result.stderr
    assert files(run) == before


def test_export_refuses_a_directory_of_other_files(run, tmp_path):
    target = tmp_path / "mine"
    target.mkdir()
    (target / "notes.txt").write_text("mine")
    result = runner.invoke(app, ["export", str(run), str(target), "--overwrite"])
    assert result.exit_code == 1 and "[E072]" in result.stderr
    assert "(notes.txt)" in result.stderr
    assert (target / "notes.txt").read_text() == "mine"
    empty = tmp_path / "empty"
    empty.mkdir()
    assert runner.invoke(app, ["export", str(run), str(empty)]).exit_code == 0
    assert (empty / "weights.hdf5").exists()


def test_exporting_an_export_says_it_is_one(run, tmp_path):
    """It said "No such file: 'EXPORT/checkpoint.pt'"."""
    export(run, tmp_path / "exported")
    result = runner.invoke(app, ["export", str(tmp_path / "exported"), str(tmp_path / "again")])
    assert result.exit_code == 1
    message = " ".join(result.stderr.split())
    assert "[E108]" in message and "it is an export already (weights.hdf5)" in message
    assert not (tmp_path / "again").exists()


def test_export_into_the_run_s_model_takes_and_frees_the_run_s_lock(run):
    """An export into RUN/model writes into the run: it holds the run's lock meanwhile
    (test_lock: refused while `pretrain` runs there), and frees it after."""
    result = runner.invoke(app, ["export", str(run), str(run / "model"), "--overwrite"])
    assert result.exit_code == 0, result.output
    assert (run / ".lock").read_text() == ""
    assert sorted(p.name for p in (run / "model").iterdir()) == [
        "options.json", "softmax.hdf5", "vocab.txt", "weights.hdf5"]
    assert temps(run) == []
