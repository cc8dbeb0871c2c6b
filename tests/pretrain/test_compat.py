"""Checkpoints of spacy-elmo 0.1 without the checksum over their whole content (the
compatibility fixture's, tests/fixtures/compat, and today's rewritten so) are refused with
the way to go on, and nothing of the run is changed."""

import shutil
from pathlib import Path

import pytest
import torch

from spacy_elmo.errors import ElmoError
from spacy_elmo.pretrain import trainer as trainer_module
from spacy_elmo.pretrain.checkpoint import CHECKSUM, OLD_CHECKSUM, load_checkpoint
from spacy_elmo.pretrain.config import PretrainConfig
from spacy_elmo.pretrain.export import export
from spacy_elmo.pretrain.trainer import train

from .conftest import tiny_config

COMPAT = Path(__file__).resolve().parents[1] / "fixtures" / "compat" / "pretrain"


def files_of(run: Path):
    return {p.name: p.read_bytes() for p in run.iterdir() if p.name != ".lock"}


def test_a_checkpoint_of_0_1_is_refused_by_resume_and_export(tmp_path, monkeypatch):
    shutil.copytree(COMPAT, tmp_path / "pretrain")
    monkeypatch.chdir(tmp_path / "pretrain")  # the run names its files by relative paths
    run = Path("run")
    raw = torch.load(run / "checkpoint.pt", weights_only=True)
    assert CHECKSUM not in raw and OLD_CHECKSUM in raw  # what 0.1 wrote
    before = files_of(run)
    fix = r"--init-weights run/model.*spacy-elmo export run OUT"
    with pytest.raises(ElmoError, match=r"\[E251\] 'run/checkpoint.pt' is a checkpoint of "
                                        r"spacy-elmo 0.1 \(a checksum over its tensors only"):
        load_checkpoint(run)
    config = PretrainConfig.from_record(run / "config.json", [
        ("training.max_steps", 3, "--max-steps")])
    with pytest.raises(ElmoError, match=r"\[E251\].*" + fix):
        train(config, resume=True, progress=False)
    with pytest.raises(ElmoError, match=r"\[E251\]"):
        export(run, tmp_path / "export")
    assert files_of(run) == before
    assert not (tmp_path / "export").exists() and not (run / "model").exists()


@pytest.mark.parametrize("checksum", [OLD_CHECKSUM, None])
def test_today_s_checkpoint_rewritten_as_0_1_is_refused(tmp_path, monkeypatch, checksum):
    """0.1 wrote a checksum over the tensors only, and before that none (nor the shuffle
    buffer's settings, nor CPU time): neither is read, whatever else it holds."""
    monkeypatch.setattr(trainer_module, "draw_curves", lambda metrics, png: True)
    train(tiny_config(tmp_path, max_steps=4), progress=False)
    path = tmp_path / "run" / "checkpoint.pt"
    data = torch.load(path, weights_only=True)
    del data[CHECKSUM]
    if checksum is not None:
        data[checksum] = "0" * 64
    torch.save(data, path)
    found = "a checksum over its tensors only" if checksum else "no checksum"
    with pytest.raises(ElmoError, match=rf"\[E251\] .* \({found}, not the checksum over"):
        train(tiny_config(tmp_path, max_steps=8), resume=True, progress=False)
    assert torch.load(path, weights_only=True)["step"] == 4  # left as it was
