"""A pretraining checkpoint written by an earlier version (tests/fixtures/compat) resumes."""

import json
import shutil
from pathlib import Path

import pytest
import torch

from spacy_elmo.errors import ElmoError
from spacy_elmo.pretrain import ddp
from spacy_elmo.pretrain import trainer as trainer_module
from spacy_elmo.pretrain.checkpoint import (
    CHECKSUM,
    TENSORS_CHECKSUM,
    content_checksum,
    load_checkpoint,
    tensors_checksum,
)
from spacy_elmo.pretrain.config import PretrainConfig
from spacy_elmo.pretrain.trainer import Trainer, train

from .conftest import tiny_config

COMPAT = Path(__file__).resolve().parents[1] / "fixtures" / "compat" / "pretrain"


def test_checkpoint_of_an_earlier_version_resumes_one_step(tmp_path, monkeypatch):
    shutil.copytree(COMPAT, tmp_path / "pretrain")
    monkeypatch.chdir(tmp_path / "pretrain")  # the run names its files by relative paths
    saved = load_checkpoint("run")
    assert saved["step"] == 2
    config = PretrainConfig.from_file(Path("run/config.json"), max_steps=3)
    # what the old checkpoint holds is what the resumed trainer starts from
    trainer = Trainer.resume(config, ddp.setup("cpu"), progress=False)
    state = trainer.model.state_dict()
    assert state.keys() == saved["model"].keys()
    assert all(torch.equal(state[k], v) for k, v in saved["model"].items())
    assert trainer.vocab.words == saved["vocab"]
    assert trainer.step == 2
    del trainer
    result = train(config, resume=True, progress=False)
    assert result.step == 3 and not result.stopped
    after = load_checkpoint("run")
    assert after["step"] == 3
    assert any(not torch.equal(after["model"][k], v) for k, v in saved["model"].items())
    records = [json.loads(line) for line in Path("run/metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records if r["type"] == "train"] == [1, 2, 3]
    assert Path("run/model/weights.hdf5").exists()


def write_as_before(path: Path) -> None:
    """Rewrite a checkpoint as the version before whole-content checksums wrote it: the
    same content with a checksum over its tensors only."""
    data = torch.load(path, weights_only=True)
    del data[CHECKSUM]
    data[TENSORS_CHECKSUM] = tensors_checksum(data)
    torch.save(data, path)


def test_checkpoint_with_a_tensors_checksum_resumes_exactly(tmp_path, monkeypatch):
    """A run checkpointed by the previous version resumes to what an uninterrupted run
    gives; its next checkpoint carries the checksum over the whole content."""
    monkeypatch.setattr(trainer_module, "draw_curves", lambda metrics, png: True)
    straight = train(tiny_config(tmp_path, output=str(tmp_path / "a"), max_steps=8),
                     progress=False)
    train(tiny_config(tmp_path, output=str(tmp_path / "b"), max_steps=4), progress=False)
    path = tmp_path / "b" / "checkpoint.pt"
    write_as_before(path)
    assert load_checkpoint(path)["step"] == 4
    resumed = train(tiny_config(tmp_path, output=str(tmp_path / "b"), max_steps=8),
                    resume=True, progress=False)
    a, b = straight.model.state_dict(), resumed.model.state_dict()
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    raw = torch.load(path, weights_only=True)
    assert raw["step"] == 8 and TENSORS_CHECKSUM not in raw
    assert raw[CHECKSUM] == content_checksum(raw)


def test_tensors_checksum_of_an_earlier_version_is_still_checked(tmp_path):
    path = tmp_path / "checkpoint.pt"
    shutil.copy(COMPAT / "run" / "checkpoint.pt", path)
    raw = torch.load(path, weights_only=True)
    assert CHECKSUM not in raw and raw[TENSORS_CHECKSUM] == tensors_checksum(raw)
    intact = path.read_bytes()
    at = intact.find(raw["model"]["softmax.weight"].numpy().tobytes()[:64])
    assert at > 0
    path.write_bytes(intact[:at] + bytes([intact[at] ^ 0x40]) + intact[at + 1:])
    with pytest.raises(ElmoError, match="is damaged: its content does not match the checksum"):
        load_checkpoint(path)
