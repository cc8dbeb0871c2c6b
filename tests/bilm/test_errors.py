"""Bad input gets a clear error from the catalogue (or, where documented, a warning)."""

import json
import os
import shutil

import h5py
import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from spacy_elmo.bilm import batch_to_ids, load_bilm, save_bilm
from spacy_elmo.bilm.embedder import Embedder
from spacy_elmo.cli import app
from spacy_elmo.embed.files import read_lines
from spacy_elmo.embed.job import embed_file
from spacy_elmo.errors import ElmoError

from ..conftest import TINY_OPTIONS, make_random_bilm

runner = CliRunner()


def fail(*args):
    """Run the CLI, expect exit code 1, return its output on one line."""
    result = runner.invoke(app, [str(a) for a in args])
    assert result.exit_code == 1, result.output
    return " ".join(result.output.split())


@pytest.fixture
def text(tmp_path):
    path = tmp_path / "in.txt"
    path.write_text("a b\nc\n", encoding="utf-8")
    return path


@pytest.fixture
def weights_copy(tmp_path, tiny_weights_dir):
    """A private copy of the tiny weights directory, free to break."""
    return shutil.copytree(tiny_weights_dir, tmp_path / "weights")


def test_missing_input(tmp_path, tiny_weights_dir):
    out = fail("embed", tmp_path / "nope.txt", tmp_path / "o.hdf5", "--weights",
               tiny_weights_dir)
    assert "No such file" in out and "nope.txt" in out


def test_missing_weights_and_options(tmp_path, text, tiny_weights_dir):
    out = fail("embed", text, tmp_path / "o.hdf5", "--weights", tmp_path / "w.hdf5")
    assert "No such file" in out and "w.hdf5" in out
    out = fail("embed", text, tmp_path / "o.hdf5", "--weights",
               tiny_weights_dir / "weights.hdf5", "--options", tmp_path / "opts.json")
    assert "No such file" in out and "opts.json" in out
    assert "No such file" in fail("info", tmp_path / "w.hdf5")


def test_unreadable_input(tmp_path, tiny_weights_dir):
    out = fail("embed", tmp_path, tmp_path / "o.hdf5", "--weights", tiny_weights_dir)
    assert "Cannot read" in out and "directory" in out


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="needs file permissions")
def test_unreadable_file(text, tmp_path, tiny_weights_dir):
    text.chmod(0)
    try:
        assert "Cannot read" in fail("embed", text, tmp_path / "o.hdf5", "--weights",
                                     tiny_weights_dir)
    finally:
        text.chmod(0o644)


def test_output_is_a_directory(text, tmp_path, tiny_weights_dir):
    out = fail("embed", text, tmp_path, "--weights", tiny_weights_dir)
    assert "Cannot write" in out


def test_options_not_matching_weights(tmp_path, text, weights_copy):
    TINY_OPTIONS.replace(lstm_dim=16).to_file(weights_copy / "options.json")
    out = fail("embed", text, tmp_path / "o.hdf5", "--weights", weights_copy)
    name = "RNN_0/RNN/MultiRNNCell/Cell0/LSTMCell/W_0"
    assert f"dataset '{name}'" in out
    assert "shape (12, 48)" in out and "ask for (12, 64)" in out


def test_huge_options_fail_on_the_shapes_before_the_model_is_allocated(weights_copy,
                                                                       monkeypatch):
    """A typo such as a much larger lstm dim is a shape error (E004), not an out-of-memory
    error from building the model the options describe."""
    def no_model(*args, **kwargs):
        raise AssertionError("the model was built before the shapes were checked")

    monkeypatch.setattr("spacy_elmo.bilm.io.weights.BiLM", no_model)
    TINY_OPTIONS.replace(lstm_dim=10**8).to_file(weights_copy / "options.json")
    with pytest.raises(ElmoError, match=r"\[E004\] .* ask for \(12, 400000000\)"):
        load_bilm(weights_copy)


def test_a_huge_character_budget_is_refused_by_info_and_embed(weights_copy, tmp_path):
    """max_characters_per_token 10**12 (no shape holds it) was accepted by `info` and ended
    `embed` in a 7 TiB allocation: it is E007 with its range, before anything is built."""
    options = json.loads((weights_copy / "options.json").read_text())
    options["char_cnn"]["max_characters_per_token"] = 10**12
    (weights_copy / "options.json").write_text(json.dumps(options))
    for args in (["info", str(weights_copy)],
                 ["embed", str(_text(tmp_path)), str(tmp_path / "o.h5"), "--weights",
                  str(weights_copy)]):
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 1, result.output
        assert "[E007]" in result.output and "max_characters_per_token" in result.output
        assert "[3, 1024]" in result.output and "Traceback" not in result.output
    assert not (tmp_path / "o.h5").exists()


def _text(tmp_path):
    path = tmp_path / "in.txt"
    path.write_text("The cat sat .\n", encoding="utf-8")
    return path


def test_options_with_other_layer_count(weights_copy):
    TINY_OPTIONS.replace(n_highway=2).to_file(weights_copy / "options.json")
    with pytest.raises(ElmoError, match="no dataset 'CNN_high_1/W_carry'.*different model"):
        load_bilm(weights_copy)



@pytest.mark.parametrize("change,what,name", [
    ({"n_highway": 0}, "highway layers", "CNN_high_0/W_carry"),
    ({"n_layers": 1}, "LSTM layers", "RNN_0/RNN/MultiRNNCell/Cell1/LSTMCell/B"),
])
def test_options_with_fewer_layers_than_the_weights(weights_copy, change, what, name):
    """Options asking for fewer layers than the file holds loaded silently and gave wrong
    vectors; the file's extra layers are named."""
    TINY_OPTIONS.replace(**change).to_file(weights_copy / "options.json")
    with pytest.raises(ElmoError, match=f"holds {what} that the options do not use") as info:
        load_bilm(weights_copy)
    assert name in str(info.value)
    assert name in fail("info", weights_copy)


def test_datasets_outside_the_layers_do_not_count_as_unused(weights_copy):
    """Only layers the options can leave out are refused; other datasets are not read."""
    with h5py.File(weights_copy / "weights.hdf5", "r+") as f:
        f["notes/char_rows"] = np.arange(3.0)
    loaded = load_bilm(weights_copy / "weights.hdf5", weights_copy / "options.json")
    assert torch.equal(loaded.encoder.char_embedding.weight,
                       make_random_bilm().encoder.char_embedding.weight)


def test_group_where_a_dataset_is_expected(weights_copy):
    """A group in a dataset's place raised AttributeError: 'Group' object has no attribute
    'shape'."""
    with h5py.File(weights_copy / "weights.hdf5", "r+") as f:
        del f["CNN_proj/W_proj"]
        f.create_group("CNN_proj/W_proj")
    with pytest.raises(ElmoError, match="no dataset 'CNN_proj/W_proj'.*is an HDF5 group"):
        load_bilm(weights_copy)

def test_truncated_hdf5(weights_copy):
    path = weights_copy / "weights.hdf5"
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(ElmoError, match="Could not read .* truncated or of another format"):
        load_bilm(weights_copy)
    assert "truncated" in fail("info", weights_copy)


@pytest.mark.parametrize("kind", ["torch.save", "random bytes", "empty"])
def test_weights_of_another_format(weights_copy, kind):
    path = weights_copy / "weights.hdf5"
    if kind == "torch.save":
        torch.save(make_random_bilm().state_dict(), path)
    else:
        path.write_bytes(np.random.default_rng(0).bytes(4096) if kind == "random bytes" else b"")
    with pytest.raises(ElmoError, match="as an HDF5 weights file") as info:
        load_bilm(weights_copy)
    assert ("PyTorch checkpoint" in str(info.value)) == (kind == "torch.save")


def test_written_weights_have_the_usual_file_mode(tmp_path, tiny_bilm):
    import os

    from spacy_elmo.bilm import save_bilm

    umask = os.umask(0o022)
    try:
        _, weights = save_bilm(tiny_bilm, tmp_path)
    finally:
        os.umask(umask)
    assert weights.stat().st_mode & 0o777 == 0o644


def test_n_characters_261_loads_with_warning_and_same_vectors(weights_copy):
    data = json.loads((weights_copy / "options.json").read_text())
    data["char_cnn"]["n_characters"] = 261
    (weights_copy / "options.json").write_text(json.dumps(data))
    with pytest.warns(UserWarning, match="n_characters=261"):
        bilm = load_bilm(weights_copy)
    ids = batch_to_ids([["a", "b", "<S>"]])
    with torch.no_grad():
        torch.testing.assert_close(bilm(ids).layers, make_random_bilm()(ids).layers,
                                   atol=0, rtol=0)


def test_n_characters_300_is_an_error(weights_copy):
    data = json.loads((weights_copy / "options.json").read_text())
    data["char_cnn"]["n_characters"] = 300
    (weights_copy / "options.json").write_text(json.dumps(data))
    with pytest.raises(ElmoError, match="'char_cnn.n_characters' is 300"):
        load_bilm(weights_copy)


def test_broken_options_json(weights_copy):
    (weights_copy / "options.json").write_text("{not json")
    assert "as JSON options" in fail("info", weights_copy)


def test_non_utf8_input_names_the_line(tmp_path, tiny_weights_dir):
    path = tmp_path / "in.txt"
    path.write_bytes("ok line\ncaf\u00e9 ok\n".encode() + b"caf\xe9 latin1\nmore\n")
    out = fail("embed", path, tmp_path / "o.hdf5", "--weights", tiny_weights_dir)
    assert "Line 3 of" in out and "not valid UTF-8" in out
    assert not (tmp_path / "o.hdf5").exists()  # no half-written output
    with pytest.raises(ElmoError, match="Line 3"):
        list(read_lines(path))


def test_long_line_in_stateful_mode_is_refused(tmp_path, tiny_weights_dir):
    path = tmp_path / "in.txt"
    path.write_text("a b\n" + " ".join(["w"] * 30) + "\n", encoding="utf-8")
    out = fail("embed", path, tmp_path / "o.hdf5", "--weights", tiny_weights_dir,
               "--stateful", "--window", 20)
    assert "Line 2 has 30 tokens" in out and "Drop --stateful" in out


def test_bad_layers_and_sizes(tmp_path, text, tiny_weights_dir):
    out = fail("embed", text, tmp_path / "o.hdf5", "--weights", tiny_weights_dir,
               "--layers", "bottom")
    assert "Unknown value 'bottom' for --layers" in out
    out = fail("embed", text, tmp_path / "o.hdf5", "--weights", tiny_weights_dir,
               "--batch-size", 0)
    assert "--batch-size must be a positive integer, got 0" in out
    with pytest.raises(ElmoError, match="window must be a positive integer"):
        Embedder(make_random_bilm(), window=0)


def test_out_of_range_gpu_id(text, tmp_path, tiny_weights_dir):
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    count = torch.cuda.device_count()
    with pytest.raises(ElmoError, match="sees only"):
        embed_file(text, tmp_path / "o.hdf5", weights=tiny_weights_dir, gpu_id=count)


def test_directory_without_options_file(tmp_path):
    save_bilm(make_random_bilm(), tmp_path / "m")
    (tmp_path / "m" / "options.json").unlink()
    with pytest.raises(ElmoError, match="No options file for the weights.*options.json"):
        load_bilm(tmp_path / "m")


def test_allennlp_style_file_names(tmp_path):
    save_bilm(make_random_bilm(), tmp_path / "m")
    (tmp_path / "m" / "weights.hdf5").rename(tmp_path / "m" / "elmo_tiny_weights.hdf5")
    (tmp_path / "m" / "options.json").rename(tmp_path / "m" / "elmo_tiny_options.json")
    bilm, expected = load_bilm(tmp_path / "m" / "elmo_tiny_weights.hdf5"), make_random_bilm()
    assert bilm.options == expected.options  # found elmo_tiny_options.json beside it
    for (name, a), b in zip(bilm.state_dict().items(), expected.state_dict().values(),
                            strict=True):
        assert torch.equal(a, b), name
