"""A pretraining checkpoint written by an earlier version (tests/fixtures/compat) resumes."""

import json
import shutil
from pathlib import Path

import torch

from spacy_elmo.pretrain import ddp
from spacy_elmo.pretrain.checkpoint import load_checkpoint
from spacy_elmo.pretrain.config import PretrainConfig
from spacy_elmo.pretrain.trainer import Trainer, train

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
