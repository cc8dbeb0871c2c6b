"""Bad input gets a clear error."""

import json

import h5py
import numpy as np
import pytest
import torch

from spacy_elmo.errors import ElmoError
from spacy_elmo.pretrain import ddp
from spacy_elmo.pretrain.config import PretrainConfig
from spacy_elmo.pretrain.perplexity import load_lm
from spacy_elmo.pretrain.rundir import read_metrics
from spacy_elmo.pretrain.trainer import Trainer, train

from .conftest import TINY_OPTIONS, tiny_config


def run(config, **kwargs):
    return train(config, progress=False, **kwargs)


def test_missing_corpus(tmp_path):
    with pytest.raises(ElmoError, match="No corpus files match"):
        run(tiny_config(tmp_path, train=[str(tmp_path / "absent.txt")]))


def test_empty_corpus(tmp_path):
    (tmp_path / "empty.txt").write_text("")
    with pytest.raises(ElmoError, match="no usable text"):
        run(tiny_config(tmp_path, train=[str(tmp_path / "empty.txt")]))


def test_binary_garbage_corpus(tmp_path):
    (tmp_path / "bin.dat.txt").write_bytes(bytes(range(256)) * 50 + b"\n\xff\xfe\n")
    with pytest.raises(ElmoError, match=r"no usable text \(52 undecodable lines skipped\)"):
        run(tiny_config(tmp_path, train=[str(tmp_path / "bin.dat.txt")]))


def test_dev_without_in_vocabulary_words(tmp_path):
    (tmp_path / "dev.txt").write_text("zzz qqq xxx\n")
    with pytest.raises(ElmoError, match="no in-vocabulary words"):
        run(tiny_config(tmp_path, dev=[str(tmp_path / "dev.txt")]))


def test_vocabulary_smaller_than_negatives(tmp_path):
    with pytest.raises(ElmoError, match="draws 500 negatives"):
        run(tiny_config(tmp_path, n_negatives=500))


def test_init_weights_with_mismatched_options(tmp_path, tiny_weights_dir):
    config = tiny_config(tmp_path, init_weights=str(tiny_weights_dir),
                         options={"lstm_dim": 99})
    with pytest.raises(ElmoError, match=r"lstm_dim = 99.*lstm_dim = 12"):
        run(config)


def test_output_of_another_run_resume_and_changed_config(tmp_path):
    run(tiny_config(tmp_path, max_steps=2))
    with pytest.raises(ElmoError, match="already holds a pretraining run"):
        run(tiny_config(tmp_path, max_steps=2))
    with pytest.raises(ElmoError, match=r"window = 6.*asks for 7"):
        run(tiny_config(tmp_path, max_steps=4, window=7), resume=True)
    with pytest.raises(ElmoError, match="options.lstm.dim"):
        run(tiny_config(tmp_path, max_steps=4, options={**TINY_OPTIONS, "lstm_dim": 20}),
            resume=True)
    assert run(tiny_config(tmp_path, max_steps=2), overwrite=True).step == 2
    with pytest.raises(ElmoError, match="holds no checkpoint"):
        run(tiny_config(tmp_path, output=str(tmp_path / "new")), resume=True)


def test_config_file_keys_are_checked(tmp_path):
    path = tmp_path / "p.cfg"
    path.write_text('[paths]\ntrain = ["x.txt"]\n\n[training]\nbatchsize = 3\n')
    with pytest.raises(ElmoError, match=r"\[E111\].*unknown key.*'training.batchsize'"):
        PretrainConfig.from_file(path)
    path.write_text('[paths]\ntrain = ["x.txt"]\n\n[training]\nbatch_size = 3\n')
    assert PretrainConfig.from_file(path, window=9).batch_size == 3
    record = tmp_path / "config.json"  # a run's record of its settings: the same check
    record.write_text(json.dumps({"train": ["x.txt"], "batchsize": 3}))
    with pytest.raises(ElmoError, match=r"\[E111\].*unknown key.*\['batchsize'\]"):
        PretrainConfig.from_record(record)
    with pytest.raises(ElmoError, match="optimizer must be"):
        PretrainConfig(optimizer="sgd")


@pytest.mark.parametrize("device", ["gpu", "CUDA", "mps", "cuda:x", ""])
def test_device_names_are_checked(tmp_path, device):
    with pytest.raises(ElmoError, match=r"\[E112\] Pretraining setting device must be auto, "
                                        r"cpu, cuda or cuda:N"):
        tiny_config(tmp_path, device=device)


@pytest.mark.skipif(torch.cuda.is_available(), reason="asks for a GPU that is not there")
@pytest.mark.parametrize("device,index", [("cuda", 0), ("cuda:3", 3)])
def test_a_gpu_device_without_one_is_a_clear_error(tmp_path, device, index):
    with pytest.raises(ElmoError, match=rf"\[E126\] The pretraining device '{device}' needs "
                                        rf"CUDA device {index}, but torch sees 0"):
        run(tiny_config(tmp_path, device=device))
    assert not (tmp_path / "run").exists()


def test_a_torn_metrics_line_does_not_stop_a_resume(tmp_path):
    """A crash or a full disk can leave half a record at the end of metrics.jsonl."""
    run(tiny_config(tmp_path, max_steps=5))
    metrics = tmp_path / "run" / "metrics.jsonl"
    with metrics.open("a", encoding="utf-8") as f:
        f.write('{"type": "train", "st')
    assert read_metrics(metrics)[-1]["step"] == 5
    result = run(tiny_config(tmp_path, max_steps=8), resume=True)
    assert result.step == 8
    records = read_metrics(metrics)
    assert len(records) == len(metrics.read_text(encoding="utf-8").splitlines())
    assert max(r["step"] for r in records if r["type"] == "train") == 8


def test_metrics_that_cannot_be_written_warn_once_and_training_goes_on(tmp_path, capsys):
    trainer = Trainer.start(tiny_config(tmp_path), ddp.setup("cpu"), overwrite=False,
                            progress=False)
    metrics = tmp_path / "run" / "metrics.jsonl"
    metrics.unlink(missing_ok=True)
    metrics.mkdir()  # appending to it fails
    trainer.log({"type": "train", "step": 1})
    trainer.log({"type": "train", "step": 2})
    out = capsys.readouterr().out
    assert out.count("[W014] Could not append to") == 1 and "training goes on" in out


def test_curves_that_cannot_be_written_warn_once_and_training_goes_on(tmp_path, capsys,
                                                                     monkeypatch):
    """A full disk while drawing curves.png ended the run at a dev evaluation."""
    from spacy_elmo.files.atomic import DiskFull
    from spacy_elmo.pretrain import trainer as trainer_module

    def full(metrics, png):
        raise DiskFull("[E999] the disk is full")

    monkeypatch.setattr(trainer_module, "draw_curves", full)
    result = run(tiny_config(tmp_path, max_steps=6, eval_every=2))
    assert result.step == 6 and not result.stopped
    out = capsys.readouterr().out
    assert out.count("[W016] Could not write") == 1 and "training goes on" in out


def test_a_damaged_softmax_is_named(tmp_path):
    run(tiny_config(tmp_path, max_steps=2, eval_every=2))
    softmax = tmp_path / "run" / "model" / "softmax.hdf5"
    softmax.write_bytes(b"not hdf5 at all")
    with pytest.raises(ElmoError, match=r"\[E002\] Could not read '.*softmax.hdf5' as an "
                                        r"export's softmax"):
        load_lm(tmp_path / "run" / "model")
    with h5py.File(softmax, "w") as f:
        f["other"] = np.zeros(3)
    with pytest.raises(ElmoError, match=r"\[E002\] .*softmax.hdf5"):
        load_lm(tmp_path / "run" / "model")
