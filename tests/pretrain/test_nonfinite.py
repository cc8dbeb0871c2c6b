"""Pretraining stops when the loss is not finite (NaN, inf), naming the step, keeps the last
good checkpoint and never writes a checkpoint, snapshot or export with non-finite weights."""

import json
import shutil

import h5py
import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from spacy_elmo.cli import app
from spacy_elmo.errors import ElmoError
from spacy_elmo.pretrain import trainer as trainer_module
from spacy_elmo.pretrain.checkpoint import load_checkpoint
from spacy_elmo.pretrain.export import export_model
from spacy_elmo.pretrain.trainer import Trainer, train

from .conftest import tiny_config


@pytest.fixture(autouse=True)
def no_curves(monkeypatch):
    monkeypatch.setattr(trainer_module, "draw_curves", lambda metrics, png: True)


def quick(tmp_path, **changes):
    return tiny_config(tmp_path, **{"dev": [], "max_steps": 10, "checkpoint_every": 5,
                                    "snapshot_every": 5, **changes})


def poison_after(monkeypatch, at_step):
    """After the optimizer step `at_step`, one weight of the LSTM becomes NaN (as a step
    of a diverging run leaves it); the loss of the next step is then NaN."""
    original = Trainer.train_step

    def step(self):
        loss = original(self)
        if self.step == at_step:
            with torch.no_grad():
                next(self.model.bilm.lstm.parameters()).view(-1)[0] = float("nan")
        return loss

    monkeypatch.setattr(Trainer, "train_step", step)


def finite(state):
    return all(bool(torch.isfinite(v).all()) for v in state.values() if v.is_floating_point())


def test_a_nan_loss_stops_the_run_and_keeps_the_last_good_checkpoint(tmp_path, monkeypatch):
    """A run whose loss became NaN trained on and exported NaN weights, printing success."""
    poison_after(monkeypatch, 6)
    with pytest.raises(ElmoError, match=r"\[E140\] Training stopped at step 7: the loss is "
                                        r"nan.*The checkpoint of step 5 is kept"):
        train(quick(tmp_path), progress=False)
    out = tmp_path / "run"
    saved = load_checkpoint(out)
    assert saved["step"] == 5 and finite(saved["model"])
    assert not (out / "model").exists()
    assert [p.name for p in (out / "snapshots").iterdir()] == ["step_0000005"]
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert records[-1]["type"] == "error" and records[-1]["step"] == 7
    # the CLI: a non-zero exit, and a resume continues from the kept checkpoint
    monkeypatch.undo()
    monkeypatch.setattr(trainer_module, "draw_curves", lambda metrics, png: True)
    assert train(quick(tmp_path, lr=0.1), resume=True, progress=False).step == 10


def test_non_finite_weights_are_never_checkpointed(tmp_path, monkeypatch):
    """Weights that went NaN in the step of a checkpoint (the loss of that step was still
    finite) are not written: the previous checkpoint stays."""
    poison_after(monkeypatch, 10)
    with pytest.raises(ElmoError, match=r"\[E141\] Refusing to write the checkpoint of step "
                                        r"10: the weights hold 1 non-finite value"):
        train(quick(tmp_path, snapshot_every=None), progress=False)
    monkeypatch.undo()
    monkeypatch.setattr(trainer_module, "draw_curves", lambda metrics, png: True)
    poison_after(monkeypatch, 10)  # a snapshot is an export: refused as well
    with pytest.raises(ElmoError, match=r"\[E141\] Refusing to write an export to "
                                        r"'.*step_0000010'"):
        train(quick(tmp_path, output=str(tmp_path / "snap")), progress=False)
    assert not (tmp_path / "snap" / "snapshots" / "step_0000010").exists()
    saved = load_checkpoint(tmp_path / "run")
    assert saved["step"] == 5 and finite(saved["model"])
    assert not (tmp_path / "run" / "model").exists()


def test_the_cli_exits_non_zero(tmp_path, monkeypatch):
    poison_after(monkeypatch, 1)
    config = tmp_path / "run.cfg"
    config.write_text(quick(tmp_path).to_cfg())
    result = CliRunner().invoke(app, ["pretrain", str(config)])
    assert result.exit_code == 1
    assert "[E140] Training stopped at step 2" in result.stderr
    assert "No checkpoint was written yet" in " ".join(result.stderr.split())
    assert not (tmp_path / "run" / "checkpoint.pt").exists()
    assert not (tmp_path / "run" / "model").exists()


def test_init_weights_with_nan_never_export_nan(tmp_path, tiny_weights_dir):
    """--init-weights with NaN values trained with loss NaN and exported NaN in 29
    datasets, printing success."""
    weights = tmp_path / "nan_weights"
    shutil.copytree(tiny_weights_dir, weights)
    with h5py.File(weights / "weights.hdf5", "r+") as f:
        names = []
        f.visititems(lambda name, obj: names.append(name)
                     if isinstance(obj, h5py.Dataset) and obj.dtype.kind == "f" else None)
        data = f[names[0]][...]
        data.reshape(-1)[:4] = np.nan
        f[names[0]][...] = data
    with pytest.raises(ElmoError):
        train(quick(tmp_path, init_weights=str(weights), options={}), progress=False)
    out = tmp_path / "run"
    assert not (out / "model").exists() and not (out / "checkpoint.pt").exists()


def test_export_refuses_non_finite_weights(tmp_path):
    run = train(quick(tmp_path, max_steps=2, snapshot_every=None), progress=False)
    model = run.model
    with torch.no_grad():
        model.softmax.bias[3] = float("inf")
    with pytest.raises(ElmoError, match=r"\[E141\] Refusing to write an export to .*1 "
                                        r"non-finite value.*'softmax.bias'"):
        export_model(model, ["<S>"], tmp_path / "out")
    assert not (tmp_path / "out").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".tmp-")]
