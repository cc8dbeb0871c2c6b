"""Every command that writes a file or directory refuses, before any work: an output that is
an input (by any name), lies in the pretraining run or biLM directory it reads or any other,
exists without --overwrite, or is '-' where a file is needed. Nothing is ever written over."""

import pytest
from typer.testing import CliRunner

from spacy_elmo.cli import app
from spacy_elmo.pretrain.trainer import train

from .pretrain.conftest import tiny_config

runner = CliRunner()


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A finished tiny run (RUN/checkpoint.pt, config.json, metrics.jsonl, RUN/model with
    its softmax) and a text file beside it."""
    tmp = tmp_path_factory.mktemp("guards")
    train(tiny_config(tmp, max_steps=2, eval_every=2, checkpoint_every=2), progress=False)
    return tmp / "run"


def _files(directory):
    return {p: p.read_bytes() for p in directory.rglob("*") if p.is_file()}


def _invoke(*args):
    result = runner.invoke(app, [str(a) for a in args])
    return result.exit_code, " ".join(result.output.split())


def _text(tmp_path):
    text = tmp_path / "dev.txt"
    text.write_text("the cat sat on the mat .\n", encoding="utf-8")
    return text


def _cases(run, text, out):
    """(command, code the error must carry) per command that writes."""
    model = run / "model"
    return [
        (["embed", text, text, "--weights", model, "--overwrite"], "E025"),
        (["embed", text, run / "checkpoint.pt", "--weights", model, "--overwrite"], "E073"),
        (["embed", text, run / "config.json", "--weights", model, "--overwrite"], "E073"),
        (["embed", text, model / "new.hdf5", "--weights", model], "E073"),
        (["embed", text, run / "new.hdf5", "--weights", model], "E073"),
        (["embed", text, out, "--weights", model], "E026"),
        (["embed", text, "-", "--weights", model, "--overwrite"], "E070"),
        (["perplexity", model, text, "--output", text, "--overwrite"], "E025"),
        (["perplexity", model, text, "--output", model / "options.json", "--overwrite"],
         "E073"),
        (["perplexity", model, text, "--output", run / "config.json", "--overwrite"], "E073"),
        (["perplexity", model, text, "--output", run / "metrics.jsonl", "--overwrite"],
         "E073"),
        (["perplexity", model, text, "--output", out], "E026"),
        (["export", run, "-"], "E070"),
        (["export", run, run], "E025"),
        (["init-pretrain-config", run / "config.json", "--overwrite"], "E073"),
        (["init-pretrain-config", model / "options.json", "--overwrite"], "E073"),
        (["init-pretrain-config", out.with_suffix(".cfg")], "E026"),
    ]


def test_every_command_that_writes_refuses_what_it_must(run, tmp_path):
    text = _text(tmp_path)
    out = tmp_path / "existing.out"
    out.write_bytes(b"precious")
    out.with_suffix(".cfg").write_bytes(b"precious")
    before = {**_files(run), **_files(tmp_path)}
    commands = {case[0][0] for case in _cases(run, text, out)}
    writers = {"embed", "perplexity", "export", "init-pretrain-config"}
    assert commands == writers  # every command with an output is walked
    for args, code in _cases(run, text, out):
        status, output = _invoke(*args)
        assert status != 0 and f"[{code}]" in output, (args, output)
    assert {**_files(run), **_files(tmp_path)} == before


def test_the_same_commands_write_where_they_may(run, tmp_path):
    text, model = _text(tmp_path), run / "model"
    for args in (["embed", text, tmp_path / "v.hdf5", "--weights", model],
                 ["perplexity", model, text, "--output", tmp_path / "p.json"],
                 ["export", run, tmp_path / "exported"],
                 ["init-pretrain-config", tmp_path / "c.cfg"]):
        status, output = _invoke(*args)
        assert status == 0, (args, output)
    status, output = _invoke("init-pretrain-config", "-")
    assert status == 0 and "[paths]" in output


def test_a_biLM_kept_as_loose_files_in_a_folder_does_not_block_outputs_beside_it(
        tmp_path, tiny_weights_dir, monkeypatch):
    """With options.json and weights.hdf5 in the working directory, `embed in.txt out.hdf5
    --options options.json --weights weights.hdf5` was refused (E025: '.' an input), and
    so was any output below that folder; writing over the weights themselves still is."""
    import shutil

    for name, allennlp in (("options.json", "elmo_x_options.json"),
                           ("weights.hdf5", "elmo_x_weights.hdf5")):  # both namings
        shutil.copy(tiny_weights_dir / name, tmp_path / name)
        shutil.copy(tiny_weights_dir / name, tmp_path / allennlp)
    monkeypatch.chdir(tmp_path)
    _text(tmp_path)
    model = ["--options", "options.json", "--weights", "weights.hdf5"]
    for out in ("out.hdf5", "emb/out.hdf5"):
        status, output = _invoke("embed", "dev.txt", out, *model)
        assert status == 0, output
    status, output = _invoke("embed", "dev.txt", "x.hdf5", "--weights", "elmo_x_weights.hdf5")
    assert status == 0, output
    before = _files(tmp_path)
    for args, code in (
            (["embed", "dev.txt", "weights.hdf5", *model, "--overwrite"], "E167"),
            (["embed", "dev.txt", "elmo_x_weights.hdf5", "--weights", "elmo_x_weights.hdf5",
              "--overwrite"], "E025"),
            (["embed", "dev.txt", "elmo_x_options.json", "--weights", "elmo_x_weights.hdf5",
              "--overwrite"], "E025"),  # the options found beside the weights are an input
            (["embed", "dev.txt", "weights.hdf5", "--overwrite"], "E167"),  # any biLM's
            (["init-pretrain-config", "options.json", "--overwrite"], "E167")):
        status, output = _invoke(*args)
        assert status != 0 and f"[{code}]" in output, (args, output)
    assert _files(tmp_path) == before


def test_an_exported_biLM_is_protected_whole(run, tmp_path):
    text = _text(tmp_path)
    export = tmp_path / "export"
    assert _invoke("export", run, export)[0] == 0
    status, output = _invoke("embed", text, export / "new.hdf5", "--weights",
                             export / "weights.hdf5")
    assert status != 0 and "[E073]" in output and "the exported biLM" in output, output
