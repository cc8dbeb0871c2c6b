"""The pretraining run written by spacy-elmo 1.0 (tests/fixtures/v1_0/pretrain: a run of
`spacy-elmo pretrain pretrain.cfg` stopped at step 2, with its checkpoint, config.json,
vocab.txt, metrics.jsonl and export, named by relative paths): its config and record read
as 1.0 wrote them, --resume continues it as 1.0 did, export writes its export again and
perplexity reads it. Never regenerate the fixture; a later format gets a new folder."""

import json
import shutil
from pathlib import Path

import h5py
import numpy as np
import pytest
from thinc.api import Config
from typer.testing import CliRunner

from spacy_elmo.cli import app
from spacy_elmo.pretrain.config import PretrainConfig

from .conftest import flat

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "v1_0"
EXPECTED = json.loads((FIXTURE / "expected.json").read_text(encoding="utf-8"))
runner = CliRunner()


@pytest.fixture
def pretrain(tmp_path, monkeypatch, no_curves):
    """A copy of the fixture's pretraining folder, the working directory (its run names
    its files by relative paths)."""
    copy = shutil.copytree(FIXTURE / "pretrain", tmp_path / "pretrain")
    monkeypatch.chdir(copy)
    return copy


def cli(*args):
    result = runner.invoke(app, [*map(str, args)])
    assert result.exit_code == 0, result.output
    return result


def metrics(run: Path):
    text = (run / "metrics.jsonl").read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def arrays_of(path: Path):
    found = {}
    with h5py.File(path, "r") as f:
        f.visititems(lambda name, item: found.__setitem__(name, item[...])
                     if isinstance(item, h5py.Dataset) else None)
    return found


def test_its_config_and_record_read_as_the_same_settings(pretrain):
    recorded = PretrainConfig.from_record(Path("run") / "config.json")
    assert recorded == PretrainConfig.from_file(Path("pretrain.cfg"))
    assert recorded.train == ["corpus.txt"] and recorded.output == "run"
    assert recorded.max_steps == 2 and recorded.lang == "en"
    printed = cli("pretrain", "pretrain.cfg", "--dry-run").stdout
    sections = Config().from_str(printed, interpolate=False)
    settings = {k: v for values in sections.values() for k, v in values.items()}
    assert PretrainConfig(**settings) == recorded


def test_resume_continues_the_run_as_1_0_did(pretrain):
    before = metrics(Path("run"))
    assert [m["step"] for m in before if m["type"] == "train"] == [1, 2]
    result = cli("pretrain", "--output", "run", "--resume", "--max-steps", "4")
    assert "to step 4" in flat(result.output)
    after = metrics(Path("run"))
    assert after[: len(before)] == before  # the record of steps 1-2 kept as written
    resumed = [{k: m[k] for k in ("type", "step", "loss", "dev_ppl") if k in m}
               for m in after if m["step"] > 2]
    assert [(m["type"], m["step"]) for m in resumed] == \
        [(m["type"], m["step"]) for m in EXPECTED["resumed"]]
    for got, expected in zip(resumed, EXPECTED["resumed"], strict=True):
        for key in ("loss", "dev_ppl"):
            if key in expected:
                assert got[key] == pytest.approx(expected[key], rel=1e-4), (got, expected)
    cli("export", "run", "exported")  # the checkpoint written at step 4 reads back
    assert json.loads(Path("exported/options.json").read_text()) == \
        json.loads(Path("run/model/options.json").read_text())


def test_export_writes_the_export_of_1_0_again(pretrain):
    cli("export", "run", "exported")
    for name in ("options.json", "vocab.txt"):
        assert (pretrain / "exported" / name).read_text(encoding="utf-8") == \
            (FIXTURE / "pretrain" / "run" / "model" / name).read_text(encoding="utf-8")
    for name in ("weights.hdf5", "softmax.hdf5"):
        got = arrays_of(pretrain / "exported" / name)
        expected = arrays_of(FIXTURE / "pretrain" / "run" / "model" / name)
        assert sorted(got) == sorted(expected) and expected
        for key, value in expected.items():
            np.testing.assert_array_equal(got[key], value, err_msg=f"{name} {key}")


@pytest.mark.parametrize("model", ["run", "run/model"])
def test_perplexity_reads_the_run_and_its_export(pretrain, tmp_path, model):
    """With the run's own settings its dev text gives the dev figures of its metrics.jsonl."""
    cli("perplexity", model, "dev.txt", "--output", tmp_path / "ppl.json")
    figures = json.loads((tmp_path / "ppl.json").read_text())
    expected = EXPECTED["perplexity"]
    assert set(figures) == set(expected)
    for key, value in expected.items():
        if isinstance(value, (int, float)):
            assert figures[key] == pytest.approx(value, rel=1e-6), key
        else:  # the model and text it read: compared as they are
            assert figures[key] == value, key
    dev, = [m for m in metrics(Path("run")) if m["type"] == "dev"]
    for key in ("dev_ppl_fwd", "dev_ppl_bwd", "dev_ppl", "dev_tokens"):
        assert figures[key] == pytest.approx(dev[key], rel=1e-6), key
