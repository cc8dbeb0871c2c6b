"""Broken or foreign ELMoForManyLangs model directories get clear errors."""

import json
import shutil
from collections import OrderedDict

import pytest
import torch
from typer.testing import CliRunner

from spacy_elmo.bilm import load_bilm, to_arrays
from spacy_elmo.cli import app
from spacy_elmo.errors import ElmoError
from spacy_elmo.pretrain.config import PretrainConfig
from spacy_elmo.pretrain.trainer import make_bilm

from .test_efml import EFML_DIR

NETWORK = "cnn_tiny_fixture.json"


@pytest.fixture
def model(tmp_path):
    """A private copy of the fixture model, free to break."""
    return shutil.copytree(EFML_DIR / "model", tmp_path / "model")


def error(path, **kwargs):
    with pytest.raises(ElmoError) as info:
        load_bilm(path, **kwargs)
    return " ".join(str(info.value).split())


def edit_network(model, section, key, value):
    data = json.loads((model / NETWORK).read_text())
    data[section][key] = value
    (model / NETWORK).write_text(json.dumps(data))


class Evil:
    """Unpickling it would create a file (arbitrary code)."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return open, (str(self.path), "w")


def test_a_directory_of_neither_format(tmp_path):
    (tmp_path / "notes.txt").write_text("hi")
    message = error(tmp_path)
    assert "neither a bilm-tf/AllenNLP model directory" in message and "char.dic" in message
    result = CliRunner().invoke(app, ["info", str(tmp_path)])
    assert result.exit_code == 1 and "neither" in result.output


@pytest.mark.parametrize("name", ["config.json", "char.dic", "word.dic", "token_embedder.pkl",
                                  "encoder.pkl", NETWORK])
def test_missing_file(model, name):
    (model / name).unlink()
    message = error(model)
    if name == NETWORK:
        assert f"names the network config '{NETWORK}'" in message and "--options" in message
    else:
        assert f"has no '{name}'" in message and "unzip" in message


def test_network_config_given_as_options_or_built_in(model, tmp_path):
    moved = tmp_path / "elsewhere.json"
    shutil.move(str(model / NETWORK), moved)
    assert load_bilm(model, moved).options.projection_dim == 8
    # the released models name EFML's own config, which is built in: here it is the wrong one
    run = json.loads((model / "config.json").read_text())
    run["config_path"] = "configs/cnn_50_100_512_4096_sample.json"
    (model / "config.json").write_text(json.dumps(run))
    message = error(model)
    assert "cnn_50_100_512_4096_sample.json (built in)" in message
    assert "missing 'convolutions.3.weight'" in message


def test_explicit_format_on_the_other_layout(model, tiny_weights_dir):
    assert "has no 'config.json'" in error(tiny_weights_dir, format="efml")
    assert "holds no 'weights.hdf5'" in error(model, format="allennlp")
    assert "Unknown value 'elmo'" in error(model, format="elmo")


@pytest.mark.parametrize("section,key,value,expected", [
    ("token_embedder", "name", "lstm", "'cnn'"), ("encoder", "name", "lstm", "'elmo'"),
    ("token_embedder", "char_dim", 0, "without a character CNN"),
    ("encoder", "cell_clip", -1, "a number >= 0")])
def test_unsupported_or_invalid_network_config(model, section, key, value, expected):
    edit_network(model, section, key, value)
    message = error(model)
    assert f"'{section}.{key}' must be" in message and expected in message


def test_sizes_contradicting_the_config(model):
    edit_network(model, "encoder", "projection_dim", 9)
    message = error(model)
    assert "'projection.weight'" in message and "(8, 25)" in message and "(9, 25)" in message


def test_dictionary_size_contradicting_the_weights(model):
    lines = (model / "word.dic").read_text(encoding="utf-8").splitlines(keepends=True)
    (model / "word.dic").write_text("".join(lines[:-1]), encoding="utf-8")
    message = error(model)
    assert "'word_emb_layer.embedding.weight'" in message and "word.dic (53 entries)" in message


@pytest.mark.parametrize("edit,expected", [
    (lambda lines: lines + ["broken line without a tab\n"], "is not '<entry> TAB <id>'"),
    (lambda lines: lines + ["\n"], "is not '<entry> TAB <id>'"),
    (lambda lines: lines[:-1] + ["last\t99\n"], "must be 0..N-1"),
    (lambda lines: [x.replace("<pad>\t", "<pax>\t") for x in lines], "lacks the required"),
])
def test_malformed_dictionary(model, edit, expected):
    lines = (model / "char.dic").read_text(encoding="utf-8").splitlines(keepends=True)
    (model / "char.dic").write_text("".join(edit(lines)), encoding="utf-8")
    assert expected in error(model)


@pytest.mark.parametrize("content,expected", [
    ([torch.zeros(2)], "holds a list"),
    (OrderedDict(weight=torch.zeros(2), note="text"), "'note' are not tensors"),
    (OrderedDict(weight=torch.zeros(2)), "missing 'forward_layer_0.input_linearity.weight'"),
])
def test_pickle_that_is_not_the_state_dict(model, content, expected):
    torch.save(content, model / "encoder.pkl")
    message = error(model)
    assert "is not the encoder state dict" in message and expected in message


def test_pickle_needing_code_is_refused_without_running_it(model, tmp_path):
    marker = tmp_path / "ran"
    torch.save(OrderedDict(payload=Evil(marker)), model / "token_embedder.pkl")
    message = error(model)
    assert "the safe loader refused it" in message and "weights_only=False" not in message
    assert not marker.exists()
    data = (EFML_DIR / "model" / "encoder.pkl").read_bytes()
    (model / "encoder.pkl").write_bytes(data[: len(data) // 2])  # truncated
    (model / "token_embedder.pkl").write_bytes(
        (EFML_DIR / "model" / "token_embedder.pkl").read_bytes())
    assert "Could not load" in error(model) and "encoder.pkl" in error(model)


def test_no_bilm_tf_export_and_no_pretraining_from_efml(model):
    bilm = load_bilm(model)
    with pytest.raises(ElmoError, match="cannot hold"):
        to_arrays(bilm)
    with pytest.raises(ElmoError, match="is an ELMoForManyLangs model"):
        make_bilm(PretrainConfig(train=["unused.txt"], init_weights=str(model)))
