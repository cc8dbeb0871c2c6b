"""`spacy-elmo widen`: an export with more LSTM cells that pretraining trains on."""

import h5py
import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from spacy_elmo.bilm import batch_to_ids, load_bilm
from spacy_elmo.cli import app
from spacy_elmo.errors import ElmoError
from spacy_elmo.pretrain import widen as widen_module
from spacy_elmo.pretrain.trainer import train
from spacy_elmo.pretrain.widen import widen

from .conftest import TINY_OPTIONS, flat, tiny_config

torch.set_num_threads(1)
SENTENCES = [["the", "cat", "sat", "on", "a", "mat", "."], ["银行", "river", "bank"]]


@pytest.fixture(scope="module")
def export_dir(tmp_path_factory):
    """A tiny run's export: weights, options, softmax and vocabulary."""
    tmp = tmp_path_factory.mktemp("widen_source")
    train(tiny_config(tmp, max_steps=2), progress=False)
    return tmp / "run" / "model"


def layers(bilm):
    with torch.no_grad():
        return bilm(batch_to_ids(SENTENCES)).layers


def read(path, name):
    with h5py.File(path, "r") as f:
        return f[name][...]


def test_cli_writes_a_wider_export_with_the_same_outputs_and_softmax(export_dir, tmp_path):
    out = tmp_path / "wide"
    result = CliRunner().invoke(app, ["widen", str(out), "--weights", str(export_dir),
                                      "--lstm-dim", "40"])
    assert result.exit_code == 0, result.output
    assert "Widened 16 -> 40 LSTM cells" in flat(result.output)
    assert "softmax and vocabulary carried over" in flat(result.output)
    wide, source = load_bilm(out), load_bilm(export_dir)
    assert wide.options.lstm_dim == 40
    torch.testing.assert_close(layers(wide), layers(source), rtol=0, atol=1e-6)
    assert (out / "vocab.txt").read_text() == (export_dir / "vocab.txt").read_text()
    for name in ("softmax/W", "softmax/b"):
        np.testing.assert_array_equal(read(out / "softmax.hdf5", name),
                                      read(export_dir / "softmax.hdf5", name))


def test_pretraining_trains_the_widened_export_from_its_softmax(export_dir, tmp_path):
    wide = widen(export_dir, tmp_path / "wide", 32).output
    config = tiny_config(tmp_path, init_weights=str(wide),
                         options={**TINY_OPTIONS, "lstm_dim": 32}, max_steps=3)
    result = train(config, progress=False)
    assert result.step == 3
    trained = load_bilm(tmp_path / "run" / "model")
    assert trained.options.lstm_dim == 32
    # three small steps from the widened weights, the new projection rows no longer zero
    added = trained.lstm.layers[0].w_proj[:, 16:].detach()
    assert 0 < float(added.abs().max()) < 0.05
    kept = trained.lstm.layers[0].w_proj[:, :16].detach()
    source = load_bilm(export_dir).lstm.layers[0].w_proj.detach()
    assert 0 < float((kept - source).norm()) < 0.2 * float(source.norm())


def test_the_shape_of_the_config_must_be_the_widened_one(export_dir, tmp_path):
    wide = widen(export_dir, tmp_path / "wide", 32).output
    config = tiny_config(tmp_path, init_weights=str(wide), options=TINY_OPTIONS)
    with pytest.raises(ElmoError, match=r"\[E104\].*lstm_dim"):
        train(config, progress=False)
    assert not (tmp_path / "run").exists()


def test_an_export_in_output_is_kept_without_overwrite(export_dir, tmp_path):
    out = widen(export_dir, tmp_path / "wide", 24).output
    before = (out / "weights.hdf5").read_bytes()
    result = CliRunner().invoke(app, ["widen", str(out), "--weights", str(export_dir),
                                      "--lstm-dim", "48"])
    assert result.exit_code == 1
    assert "E026" in result.output and "--overwrite" in flat(result.output)
    assert (out / "weights.hdf5").read_bytes() == before
    widen(export_dir, out, 48, overwrite=True)
    assert load_bilm(out).options.lstm_dim == 48


def test_writing_over_the_source_is_refused(export_dir):
    before = (export_dir / "weights.hdf5").read_bytes()
    with pytest.raises(ElmoError, match=r"\[E025\]"):
        widen(export_dir, export_dir, 32, overwrite=True)
    assert (export_dir / "weights.hdf5").read_bytes() == before


@pytest.mark.parametrize("args,code", [(["--lstm-dim", "16"], "E277"),
                                       (["--lstm-dim", "8"], "E277"),
                                       (["--lstm-dim", "many"], "Invalid value")])
def test_cli_refuses_a_size_that_does_not_widen(export_dir, tmp_path, args, code):
    out = tmp_path / "wide"
    result = CliRunner().invoke(app, ["widen", str(out), "--weights", str(export_dir), *args])
    assert result.exit_code != 0
    assert code in result.output
    assert not out.exists()


def test_a_size_beyond_memory_is_one_line_before_anything_is_built(export_dir, tmp_path):
    """2,000,000,000 cells: E279 with the need and what is available, no traceback, no
    allocation tried, nothing written."""
    out = tmp_path / "wide"
    result = CliRunner().invoke(app, ["widen", str(out), "--weights", str(export_dir),
                                      "--lstm-dim", "2000000000"])
    assert result.exit_code == 1, result.output
    assert "[E279] --lstm-dim 2,000,000,000 would make a biLM of" in result.output
    assert "Traceback" not in result.output and not out.exists()


def test_the_memory_check_counts_the_widened_parameters(export_dir, monkeypatch):
    """The count E279 gives is the widened biLM's own."""
    bilm = load_bilm(export_dir)
    wide = widen_module.widen_lstm(bilm, bilm.options.lstm_dim + 8)
    monkeypatch.setattr(widen_module, "available_memory", lambda: 1)
    with pytest.raises(ElmoError, match=r"\[E279\]") as caught:
        widen_module.check_memory(bilm, bilm.options.lstm_dim + 8)
    assert f"{sum(p.numel() for p in wide.parameters()):,} parameters" in str(caught.value)


def test_a_missing_source_is_named(tmp_path):
    result = CliRunner().invoke(app, ["widen", str(tmp_path / "o"), "--weights",
                                      str(tmp_path / "nothing"), "--lstm-dim", "32"])
    assert result.exit_code == 1
    assert "nothing" in result.output
    assert not (tmp_path / "o").exists()


def test_outputs_that_moved_are_never_written(export_dir, tmp_path, monkeypatch):
    real = widen_module.widen_lstm

    def broken(bilm, lstm_dim, *, seed=0):
        wide = real(bilm, lstm_dim, seed=seed)
        with torch.no_grad():
            wide.lstm.layers[1].w_proj[:, -1] += 1.0  # a new cell that reaches the output
        return wide

    monkeypatch.setattr(widen_module, "widen_lstm", broken)
    with pytest.raises(ElmoError, match=r"\[E278\] The widened biLM's outputs differ"):
        widen(export_dir, tmp_path / "wide", 32)
    assert not (tmp_path / "wide").exists()


def test_without_weights_the_bundled_biLM_of_lang_is_widened(tmp_path):
    out = widen(None, tmp_path / "wide", 640, lang="en").output
    wide = load_bilm(out)
    assert wide.options.lstm_dim == 640
    assert wide.options.replace(lstm_dim=512) == load_bilm(None).options
    assert not (out / "softmax.hdf5").exists()  # the bundle ships none


def test_a_language_without_a_bundled_biLM_asks_for_weights(tmp_path):
    result = CliRunner().invoke(app, ["widen", str(tmp_path / "o"), "--lstm-dim", "640",
                                      "--lang", "de"])
    assert result.exit_code == 1
    assert "E064" in result.output and "--weights" in flat(result.output)
    assert not (tmp_path / "o").exists()
