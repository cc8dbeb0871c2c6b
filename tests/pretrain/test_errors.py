"""Bad input gets a clear error."""

import json

import pytest

from spacy_elmo.errors import ElmoError
from spacy_elmo.pretrain.config import PretrainConfig
from spacy_elmo.pretrain.trainer import train

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
    path = tmp_path / "cfg.json"
    path.write_text(json.dumps({"train": ["x.txt"], "batchsize": 3}))
    with pytest.raises(ElmoError, match="unknown key"):
        PretrainConfig.from_file(path)
    path.write_text(json.dumps({"train": ["x.txt"], "batch_size": 3}))
    assert PretrainConfig.from_file(path, window=9).batch_size == 3
    with pytest.raises(ElmoError, match="optimizer must be"):
        PretrainConfig(optimizer="sgd")
