"""End to end: training learns, survives Ctrl-C, resumes, exports, and loads."""

import json
import signal

import h5py
import pytest
import torch
from typer.testing import CliRunner

from spacy_elmo.bilm import batch_to_ids, load_bilm
from spacy_elmo.cli import app
from spacy_elmo.errors import ElmoError
from spacy_elmo.pretrain.checkpoint import load_checkpoint, model_from_checkpoint
from spacy_elmo.pretrain.config import PretrainConfig
from spacy_elmo.pretrain.trainer import Trainer, train

from .conftest import tiny_config


def dev_ppls(run):
    lines = (run / "metrics.jsonl").read_text().splitlines()
    return [r["dev_ppl"] for r in map(json.loads, lines) if r["type"] == "dev"]


def test_loss_decreases_on_a_repetitive_corpus(tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the cat sat on the mat .\nthe dog ran to the red house .\n" * 50)
    options = {"lstm_dim": 32, "projection_dim": 16, "filters": [[1, 8], [2, 8], [3, 16]],
               "char_embed_dim": 4, "n_highway": 1}
    result = train(tiny_config(tmp_path, max_steps=60, eval_every=20, n_negatives=6,
                               optimizer="adam", lr=0.01, options=options), progress=False)
    ppls = dev_ppls(tmp_path / "run")
    assert len(ppls) == 3 and ppls[-1] < 0.5 * ppls[0], ppls
    assert ppls[-1] < 5.0  # 12 word types: the model predicts most tokens
    assert not result.stopped
    assert (tmp_path / "run" / "curves.png").stat().st_size > 0
    assert (tmp_path / "run" / "model" / "weights.hdf5").exists()


def test_interrupt_resume_export_and_load(tmp_path, monkeypatch):
    original = Trainer.train_step

    def step_then_interrupt(self):
        loss = original(self)
        if self.step == 3:
            signal.raise_signal(signal.SIGINT)
        return loss

    monkeypatch.setattr(Trainer, "train_step", step_then_interrupt)
    run = tmp_path / "run"
    stopped = train(tiny_config(tmp_path, max_steps=8), progress=False)
    assert stopped.stopped and stopped.step == 3
    assert load_checkpoint(run)["step"] == 3
    monkeypatch.setattr(Trainer, "train_step", original)

    runner = CliRunner()
    result = runner.invoke(app, ["pretrain", "--output", str(run), "--resume"])
    assert result.exit_code == 0, result.output
    assert load_checkpoint(run)["step"] == 8
    out = tmp_path / "exported"
    result = runner.invoke(app, ["export", str(run / "checkpoint.pt"), str(out)])
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in out.iterdir()) == [
        "options.json", "softmax.hdf5", "vocab.txt", "weights.hdf5"]
    with h5py.File(out / "weights.hdf5") as f:
        assert "char_embed" in f and not any("softmax" in name for name in f)
    with h5py.File(out / "softmax.hdf5") as f:
        n_vocab = len((out / "vocab.txt").read_text().splitlines())
        assert f["softmax/W"].shape == (n_vocab, 8)
    loaded = load_bilm(out)
    trained = model_from_checkpoint(load_checkpoint(run)).bilm.eval()
    ids = batch_to_ids([["the", "cat", "sat"], ["a", "dog"]])
    with torch.no_grad():
        assert torch.allclose(loaded(ids).layers, trained(ids).layers, atol=1e-6)


def test_resume_without_a_run_starts_one(tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the cat sat on the mat .\nthe dog ran .\n" * 20)
    run = tmp_path / "fresh"
    args = ["pretrain", str(corpus), "--output", str(run), "--lang", "whitespace",
            "--preset", "tiny", "--vocab-size", "20", "--n-negatives", "4", "--batch-size", "2",
            "--max-steps", "2", "--threads", "1", "--resume"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert load_checkpoint(run)["step"] == 2
    args[args.index("--max-steps") + 1] = "4"  # the same command again continues the run
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert load_checkpoint(run)["step"] == 4
    config = tmp_path / "run.cfg"  # a config file naming the output: the same
    config.write_text(PretrainConfig(train=[str(corpus)], output=str(tmp_path / "cfg"),
                                     preset="tiny", vocab_size=20, n_negatives=4,
                                     batch_size=2, max_steps=2, threads=1).to_cfg())
    for _ in range(2):
        result = CliRunner().invoke(app, ["pretrain", str(config), "--resume"])
        assert result.exit_code == 0, result.output
    assert load_checkpoint(tmp_path / "cfg")["step"] == 2


def test_snapshots_hold_each_exported_model_with_its_dev_perplexity(tmp_path):
    """--snapshot-every: complete exports whose dev.json matches the logged dev eval, and
    whose weights are the model of that step (later training changes the next one)."""
    train(tiny_config(tmp_path, max_steps=10, eval_every=5, snapshot_every=5), progress=False)
    snapshots = tmp_path / "run" / "snapshots"
    names = sorted(p.name for p in snapshots.iterdir())
    assert names == ["step_0000005", "step_0000010"]
    for name, ppl in zip(names, dev_ppls(tmp_path / "run"), strict=True):
        info = json.loads((snapshots / name / "dev.json").read_text())
        assert info["step"] == int(name[5:]) and info["dev_ppl"] == pytest.approx(ppl, rel=1e-9)
    ids = batch_to_ids([["the", "cat", "sat"]])
    first, last = (load_bilm(snapshots / n).eval() for n in names)
    with torch.no_grad():
        a, b = first(ids).layers, last(ids).layers
    assert a.shape == b.shape and not torch.allclose(a, b)
    final = load_bilm(tmp_path / "run" / "model").eval()
    with torch.no_grad():
        assert torch.equal(final(ids).layers, b)


@pytest.mark.parametrize("budget", ["max_minutes", "max_cpu_minutes"])
def test_time_budget_stops_evaluates_and_exports(tmp_path, budget):
    """`max_minutes` (wall) and `max_cpu_minutes`: a run ends like one that reached
    max_steps (dev eval, checkpoint, export) once its training steps have taken that long,
    and a resume with a larger budget continues it."""
    config = tiny_config(tmp_path, max_steps=10_000, eval_every=1000, **{budget: 1e-6})
    result = train(config, progress=False)
    assert not result.stopped and result.step == 1
    assert (tmp_path / "run" / "model" / "weights.hdf5").exists()
    records = [json.loads(line) for line in
               (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records if r["type"] == "dev"] == [1]
    more = train(tiny_config(tmp_path, max_steps=3), resume=True, progress=False)
    assert more.step == 3
    assert load_checkpoint(tmp_path / "run")["cpu_elapsed"] > 0
    with pytest.raises(ElmoError, match=budget):
        tiny_config(tmp_path, **{budget: 0})
