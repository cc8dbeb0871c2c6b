"""`spacy-elmo perplexity`: its --output never destroys an input or a file without
--overwrite; --max-tokens is exact; a run's model is read with the run's own settings."""

import json
import re
import shutil

import pytest
from typer.testing import CliRunner

from spacy_elmo.pretrain.trainer import train

from .conftest import tiny_config

runner = CliRunner()


def flat(text):
    return " ".join(text.split())


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ppl_cli")
    train(tiny_config(tmp, max_steps=4, eval_every=4, checkpoint_every=4, snapshot_every=4),
          progress=False)
    return tmp


def perplexity(*args):
    from spacy_elmo.cli import app

    return runner.invoke(app, ["perplexity", *map(str, args)])


def test_output_that_is_an_input_is_refused_and_nothing_is_destroyed(run, tmp_path):
    """--output MODEL/options.json exited 0 and destroyed the model; --output dev.txt
    replaced the input text."""
    model = run / "run" / "model"
    options = (model / "options.json").read_bytes()
    text = tmp_path / "dev.txt"
    shutil.copy(run / "corpus.txt", text)
    before = text.read_bytes()
    for target, code in ((model / "options.json", "E073"), (text, "E025"),
                         (model / "new.json", "E073"), (run / "run" / "config.json", "E073")):
        result = perplexity(model, text, "--output", target, "--overwrite")
        assert result.exit_code == 1, result.output
        assert f"[{code}]" in result.stderr, result.stderr
    assert (model / "options.json").read_bytes() == options
    assert not (model / "new.json").exists()
    assert text.read_bytes() == before


def test_an_existing_output_needs_overwrite(run, tmp_path):
    out = tmp_path / "ppl.json"
    out.write_text("mine")
    result = perplexity(run / "run" / "model", run / "corpus.txt", "--output", out)
    assert result.exit_code == 1 and "[E026]" in result.stderr
    assert out.read_text() == "mine"
    result = perplexity(run / "run" / "model", run / "corpus.txt", "--output", out,
                        "--overwrite", "--max-tokens", "50")
    assert result.exit_code == 0, result.output
    assert json.loads(out.read_text())["tokens"] == 50


@pytest.mark.parametrize("limit", [1, 5, 37])
def test_max_tokens_is_exact(run, tmp_path, limit):
    """--max-tokens 1 and 5 both read 16 tokens (whole sentences)."""
    out = tmp_path / "ppl.json"
    result = perplexity(run / "run" / "model", run / "corpus.txt", "--max-tokens", limit,
                        "--output", out)
    assert result.exit_code == 0, result.output
    written = json.loads(out.read_text())
    assert written["tokens"] == limit
    # each sentence also predicts its end: one sentence when cut inside the first
    assert written["dev_tokens"] > limit
    assert re.search(rf"tokens\s+{limit}\b", result.stdout), result.stdout


def logged_dev(run):
    records = [json.loads(line) for line in (run / "run" / "metrics.jsonl").open()]
    return [r for r in records if r["type"] == "dev"][-1]


@pytest.mark.parametrize("where", ["run", "run/model", "run/snapshots/step_0000004"])
def test_a_run_s_model_reproduces_its_logged_dev_perplexity(run, tmp_path, where):
    """The default --rows 64 gave another figure than the run's own batch (4 rows here),
    so a run's metrics.jsonl figure did not reproduce without --rows and --window."""
    logged = logged_dev(run)
    out = tmp_path / "ppl.json"
    # the run's dev text: its corpus, of which it read 300 tokens (dev_max_tokens, also the
    # default here: without it the whole corpus was read, another figure)
    result = perplexity(run / where, run / "corpus.txt", "--output", out)
    assert result.exit_code == 0, result.output
    written = json.loads(out.read_text())
    assert (written["rows"], written["window"], written["tokens"]) == (4, 6, 300)
    assert written["dev_ppl"] == pytest.approx(logged["dev_ppl"], rel=1e-6)
    assert written["dev_tokens"] == logged["dev_tokens"]
    assert "rows 4, window 6, lang whitespace, max tokens 300 (its dev text)" in flat(
        result.stdout)
    other = tmp_path / "other.txt"  # other text (here: the same lines) is read whole
    shutil.copy(run / "corpus.txt", other)
    result = perplexity(run / where, other, "--output", out, "--overwrite")
    assert result.exit_code == 0, result.output
    assert json.loads(out.read_text())["tokens"] > 300 and "max tokens" not in result.stdout


def test_a_model_outside_a_run_uses_the_documented_defaults(run, tmp_path):
    copy = tmp_path / "export"
    shutil.copytree(run / "run" / "model", copy)
    out = tmp_path / "ppl.json"
    result = perplexity(copy, run / "corpus.txt", "--max-tokens", 300, "--output", out)
    assert result.exit_code == 0, result.output
    written = json.loads(out.read_text())
    assert (written["rows"], written["window"]) == (64, 20)
    assert written["dev_ppl"] != pytest.approx(logged_dev(run)["dev_ppl"], rel=1e-6)
    result = perplexity(copy, run / "corpus.txt", "--max-tokens", 300, "--rows", 4,
                        "--window", 6, "--output", out, "--overwrite")
    assert result.exit_code == 0, result.output
    assert json.loads(out.read_text())["dev_ppl"] == pytest.approx(logged_dev(run)["dev_ppl"],
                                                                   rel=1e-6)


def test_an_unfinished_run_says_to_export_it(run, tmp_path):
    unfinished = tmp_path / "unfinished"
    unfinished.mkdir()
    shutil.copy(run / "run" / "checkpoint.pt", unfinished / "checkpoint.pt")
    result = perplexity(unfinished, run / "corpus.txt")
    assert result.exit_code == 1
    assert "[E143]" in result.stderr and "spacy-elmo export" in flat(result.stderr)


def test_empty_text_and_standard_input_are_named_as_such(run, tmp_path):
    model = run / "run" / "model"
    empty = tmp_path / "empty.txt"
    empty.write_text("", encoding="utf-8")
    result = perplexity(model, empty)
    assert result.exit_code == 1 and "[E144]" in flat(result.stderr)
    result = perplexity(model, "-")
    assert result.exit_code == 1 and "[E145]" in flat(result.stderr)


def test_a_non_finite_softmax_is_refused(run, tmp_path):
    """NaN in softmax.hdf5 printed perplexity nan with exit status 0."""
    import shutil

    import h5py
    import numpy as np

    model = tmp_path / "model"
    shutil.copytree(run / "run" / "model", model)
    with h5py.File(model / "softmax.hdf5", "r+") as f:
        weight = f["softmax/W"][()]
        weight.flat[0] = np.nan
        f["softmax/W"][...] = weight
    text = tmp_path / "dev.txt"
    text.write_text("the cat sat .\n", encoding="utf-8")
    result = perplexity(model, text)
    assert result.exit_code == 1 and "[E046]" in flat(result.stderr)
