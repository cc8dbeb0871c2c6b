"""Checkpoints lose nothing: N steps + resume + N steps equals 2N steps."""

import json

import pytest
import torch

from spacy_elmo.errors import ElmoError
from spacy_elmo.pretrain import checkpoint as checkpoint_module
from spacy_elmo.pretrain.checkpoint import load_checkpoint
from spacy_elmo.pretrain.rundir import read_metrics
from spacy_elmo.pretrain.trainer import train

from .conftest import tiny_config


def params(model):
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def test_resume_equals_uninterrupted(tmp_path):
    straight = train(tiny_config(tmp_path, output=str(tmp_path / "a"), max_steps=8),
                     progress=False)
    first = train(tiny_config(tmp_path, output=str(tmp_path / "b"), max_steps=4),
                  progress=False)
    assert first.step == 4
    resumed = train(tiny_config(tmp_path, output=str(tmp_path / "b"), max_steps=8),
                    resume=True, progress=False)
    assert resumed.step == 8
    a, b = params(straight.model), params(resumed.model)
    assert a.keys() == b.keys()
    for key in a:
        assert torch.equal(a[key], b[key]), key
    assert load_checkpoint(tmp_path / "a")["optimizer"]["state"].keys() == \
        load_checkpoint(tmp_path / "b")["optimizer"]["state"].keys()
    # the resumed run logs the same training losses, each step once
    assert train_losses(tmp_path / "b") == train_losses(tmp_path / "a")
    # each (re)start records where it trained, for the model card
    starts = [r for r in read_metrics(tmp_path / "b" / "metrics.jsonl") if r["type"] == "start"]
    assert [r["step"] for r in starts] == [0, 4]
    assert all(r["hardware"].endswith("(CPU only)") and r["world_size"] == 1
               and r["threads"] >= 1 and r["precision"] == "fp32" for r in starts)


def train_losses(run):
    records = read_metrics(run / "metrics.jsonl")
    return [(r["step"], r["loss"]) for r in records if r["type"] == "train"]


def test_failed_write_keeps_previous_checkpoint(tmp_path, monkeypatch):
    config = tiny_config(tmp_path, max_steps=5)
    train(config, progress=False)
    path = tmp_path / "run" / "checkpoint.pt"
    before = path.read_bytes()

    def broken_save(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(checkpoint_module.torch, "save", broken_save)
    with pytest.raises(ElmoError, match="E109|previous checkpoint is left intact"):
        train(tiny_config(tmp_path, max_steps=10), resume=True, progress=False)
    assert path.read_bytes() == before
    assert load_checkpoint(path)["step"] == 5
    assert [p.name for p in path.parent.iterdir() if p.name.startswith(".tmp")] == []


def test_a_run_continues_with_its_data_moved_known_by_name_and_size(tmp_path):
    straight = train(tiny_config(tmp_path, output=str(tmp_path / "a"), max_steps=8),
                     progress=False)
    train(tiny_config(tmp_path, output=str(tmp_path / "b"), max_steps=4), progress=False)
    # "another machine": the run directory and the text both at new paths
    moved = tmp_path / "elsewhere"
    moved.mkdir()
    (moved / "corpus.txt").write_bytes((tmp_path / "corpus.txt").read_bytes())
    (tmp_path / "b").rename(moved / "b")
    resumed = train(tiny_config(tmp_path, output=str(moved / "b"), max_steps=8,
                                train=[str(moved / "corpus.txt")]), resume=True, progress=False)
    a, b = params(straight.model), params(resumed.model)
    for key in a:
        assert torch.equal(a[key], b[key]), key
    # other text under the same name is refused, naming what differs
    (moved / "corpus.txt").write_text("other text\n", encoding="utf-8")
    with pytest.raises(ElmoError, match=r"\[E142\] .* trained on other files: '.*elsewhere/"
                                        r"corpus.txt' has 11 bytes, the run read"):
        train(tiny_config(tmp_path, output=str(moved / "b"), max_steps=10,
                          train=[str(moved / "corpus.txt")]), resume=True, progress=False)


def test_resume_past_max_steps_is_refused_and_changes_nothing(tmp_path):
    """Issue 31: `--resume --max-steps 10` on a run at step 40 printed "Trained 40 steps",
    trained nothing and rewrote config.json to max_steps 10."""
    from typer.testing import CliRunner

    from spacy_elmo.cli import app

    train(tiny_config(tmp_path, max_steps=4), progress=False)
    run = tmp_path / "run"
    before = {name: (run / name).read_bytes() for name in ("config.json", "metrics.jsonl")}
    with pytest.raises(ElmoError, match=r"\[E129\] Cannot resume the run in .* with "
                                        r"max_steps 2: it is already at step 4"):
        train(tiny_config(tmp_path, max_steps=2), resume=True, progress=False)
    result = CliRunner().invoke(app, ["pretrain", "--output", str(run), "--resume",
                                      "--max-steps", "2"])
    assert result.exit_code == 1, result.output
    assert "Trained" not in result.output and "[E129]" in result.stderr
    assert json.loads((run / "config.json").read_text())["max_steps"] == 4
    assert {name: (run / name).read_bytes() for name in before} == before
    assert load_checkpoint(run)["step"] == 4
    # at exactly max_steps a resume is the finished run again (project commands rerun it)
    again = train(tiny_config(tmp_path, max_steps=4), resume=True, progress=False)
    assert again.step == 4 and again.trained == 0
    result = CliRunner().invoke(app, ["pretrain", "--output", str(run), "--resume",
                                      "--max-steps", "4"])
    assert result.exit_code == 0, result.output
    assert "Already at step 4 (max_steps): nothing to train" in " ".join(result.output.split())
    more = CliRunner().invoke(app, ["pretrain", "--output", str(run), "--resume",
                                    "--max-steps", "6"])
    assert "Trained 2 step(s), to step 6" in " ".join(more.output.split()), more.output


@pytest.mark.parametrize("schedule,change,warns", [
    ("cosine", {"max_steps": 8}, True),
    ("linear", {"max_steps": 8}, True),
    ("linear", {"warmup_steps": 1}, True),
    ("cosine", {"lr_schedule": "linear"}, True),
    ("constant", {"max_steps": 8}, False),  # the rate does not depend on max_steps
    ("inverse_sqrt", {"max_steps": 8}, False),
    ("cosine", {"dropout": 0.2}, False),
])
def test_a_resume_that_moves_the_learning_rate_schedule_says_so(tmp_path, schedule, change,
                                                                warns):
    """A larger --max-steps on resume stretched a cosine or linear schedule without a word:
    the rate jumped at the step resumed."""
    import warnings

    from spacy_elmo.pretrain.trainer import lr_factor, warn_schedule_change

    before = tiny_config(tmp_path, max_steps=4, lr_schedule=schedule, warmup_steps=0)
    after = tiny_config(tmp_path, **{**before.to_dict(), **change})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warn_schedule_change(before, after, 2)
    found = [str(w.message) for w in caught if "[W019]" in str(w.message)]
    assert bool(found) == warns, found
    if warns:
        assert (f"rate at step 2 goes from {before.lr * lr_factor(before, 2):.3g} to "
                f"{after.lr * lr_factor(after, 2):.3g}") in found[0]
        key = next(iter(change))
        assert f"--{key.replace('_', '-')} {getattr(before, key)}" in found[0]


def test_resume_with_a_larger_max_steps_warns_of_the_stretched_schedule(tmp_path):
    settings = dict(max_steps=2, lr_schedule="cosine", dev=[], checkpoint_every=2)
    train(tiny_config(tmp_path, **settings), progress=False)
    with pytest.warns(UserWarning, match=r"\[W019\].*max_steps 2 -> 4.*--max-steps 2"):
        train(tiny_config(tmp_path, **{**settings, "max_steps": 4}), resume=True,
              progress=False)
