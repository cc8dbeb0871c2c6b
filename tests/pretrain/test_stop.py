"""A run stops promptly on SIGINT/SIGTERM, also inside a step (reading text, filling the
shuffle buffer, dev evaluation), resumes exactly after such a stop, and a second signal
aborts at once without a half-written file; sizes that would exhaust memory are refused
before any work."""

import json
import shutil
import signal

import pytest
import torch
from typer.testing import CliRunner

from spacy_elmo.cli import app
from spacy_elmo.pretrain import memory, stopping
from spacy_elmo.pretrain.checkpoint import load_checkpoint
from spacy_elmo.pretrain.corpus import SentenceSource
from spacy_elmo.pretrain.trainer import Trainer, train

from .conftest import flat, tiny_config

runner = CliRunner()


pytestmark = pytest.mark.usefixtures("no_curves")


def _signal_on_call(monkeypatch, cls, name, n, signum=signal.SIGINT):
    """Send `signum` to this process on the n-th call of cls.name (a real signal)."""
    original = getattr(cls, name)
    calls = [0]

    def wrapper(self, *args, **kwargs):
        calls[0] += 1
        if calls[0] == n:
            signal.raise_signal(signum)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(cls, name, wrapper)
    return original


def test_a_stop_while_the_shuffle_buffer_fills_is_prompt_and_resumes_exactly(
        tmp_path, monkeypatch):
    """The flag was checked only after a step: with --shuffle-buffer 10**9 the first step
    never ended, and SIGTERM or two Ctrl-C were ignored."""
    settings = dict(max_steps=4, shuffle_buffer=400, dev=[], checkpoint_every=100)
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
    whole = train(tiny_config(tmp_path / "a", **settings), progress=False)
    original = _signal_on_call(monkeypatch, SentenceSource, "_read_sentence", 150,
                               signal.SIGTERM)
    stopped = train(tiny_config(tmp_path / "b", **settings), progress=False)
    assert stopped.stopped and stopped.step == 0 and stopped.signum == signal.SIGTERM
    saved = load_checkpoint(tmp_path / "b" / "run")
    assert saved["step"] == 0 and 0 < len(saved["ranks"][0]["source"]["buffer"]) < 400
    monkeypatch.setattr(SentenceSource, "_read_sentence", original)
    resumed = train(tiny_config(tmp_path / "b", **settings), resume=True, progress=False)
    assert resumed.step == 4
    for (name, a), b in zip(whole.model.state_dict().items(),
                            resumed.model.state_dict().values(), strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0, msg=name)


def _stop_in_dev_evaluation(monkeypatch, n):
    """SIGINT in the first dev batch of the n-th dev evaluation (of any caller)."""
    from spacy_elmo.pretrain import perplexity

    evaluations, armed = [0], [False]
    original_forward = perplexity.BiLanguageModel.forward
    original_evaluate = Trainer.evaluate

    def evaluate(self):
        evaluations[0] += 1
        armed[0] = evaluations[0] == n
        return original_evaluate(self)

    def forward(self, *args, **kwargs):
        if armed[0] and not self.training:
            armed[0] = False
            signal.raise_signal(signal.SIGINT)
        return original_forward(self, *args, **kwargs)

    monkeypatch.setattr(Trainer, "evaluate", evaluate)
    monkeypatch.setattr(perplexity.BiLanguageModel, "forward", forward)
    return original_forward, original_evaluate


def test_a_stop_during_dev_evaluation_leaves_it_and_saves_the_step(tmp_path, monkeypatch):
    _stop_in_dev_evaluation(monkeypatch, 2)  # step 4's evaluation
    config = tiny_config(tmp_path, max_steps=8, eval_every=2, dev_max_tokens=6,
                         batch_size=2, window=4, checkpoint_every=100)
    result = train(config, progress=False)
    assert result.stopped and result.step == 4 and result.model.training
    assert load_checkpoint(tmp_path / "run")["step"] == 4
    records = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").open()]
    assert [r["step"] for r in records if r["type"] == "dev"] == [2]  # step 4's was left


@pytest.mark.parametrize("eval_every,snapshot_every", [(4, 2), (2, 2)])
def test_a_stop_in_a_snapshot_steps_evaluation_saves_the_step_and_a_resume_makes_it(
        tmp_path, monkeypatch, eval_every, snapshot_every):
    """A snapshot step's own dev evaluation (snapshot_every not a multiple of eval_every)
    raised StopRequested out of the run: a traceback, and the steps since the last
    checkpoint lost. Now the step is saved, and a resume makes what the stop left undone:
    the dev record and the snapshot of that step, then trains on exactly as without the
    stop."""
    from spacy_elmo.pretrain import perplexity

    settings = dict(max_steps=4, eval_every=eval_every, snapshot_every=snapshot_every,
                    dev_max_tokens=6, batch_size=2, window=4, checkpoint_every=100)
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
    whole = train(tiny_config(tmp_path / "a", **settings), progress=False)
    forward, evaluate = _stop_in_dev_evaluation(monkeypatch, 1)  # step 2's snapshot
    stopped = train(tiny_config(tmp_path / "b", **settings), progress=False)
    assert stopped.stopped and stopped.step == 2
    run = tmp_path / "b" / "run"
    assert load_checkpoint(run)["step"] == 2
    assert not (run / "snapshots" / "step_0000002").exists()
    monkeypatch.setattr(Trainer, "evaluate", evaluate)
    monkeypatch.setattr(perplexity.BiLanguageModel, "forward", forward)
    resumed = train(tiny_config(tmp_path / "b", **settings), resume=True, progress=False)
    assert resumed.step == 4 and not resumed.stopped
    for (name, a), b in zip(whole.model.state_dict().items(),
                            resumed.model.state_dict().values(), strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0, msg=name)
    for step in (2, 4):
        made = json.loads((run / "snapshots" / f"step_{step:07d}" / "dev.json").read_text())
        same = json.loads((tmp_path / "a" / "run" / "snapshots" / f"step_{step:07d}" /
                           "dev.json").read_text())
        assert made["dev_ppl"] == pytest.approx(same["dev_ppl"], rel=1e-6), step
    dev_steps = [json.loads(line)["step"] for line in (run / "metrics.jsonl").open()
                 if '"dev"' in line]
    assert dev_steps == [s for s in (2, 4) if s % eval_every == 0]


def test_a_second_signal_aborts_at_once_and_writes_nothing_half(tmp_path, monkeypatch):
    config = tmp_path / "run.cfg"
    config.write_text(tiny_config(tmp_path, max_steps=6, checkpoint_every=1, dev=[]).to_cfg())
    original_step = Trainer.train_step

    def step_then_signal(self):
        loss = original_step(self)
        if self.step == 2:
            signal.raise_signal(signal.SIGINT)
        return loss

    original_save = torch.save

    def save_with_a_second_signal(*args, **kwargs):
        if stopping._ACTIVE is not None and stopping._ACTIVE.requested:
            signal.raise_signal(signal.SIGINT)  # Ctrl-C again while the checkpoint writes
        return original_save(*args, **kwargs)

    monkeypatch.setattr(Trainer, "train_step", step_then_signal)
    monkeypatch.setattr(torch, "save", save_with_a_second_signal)
    before = signal.getsignal(signal.SIGINT)
    result = runner.invoke(app, ["pretrain", str(config)])
    assert result.exit_code == 130, result.output
    assert "[E172] Aborted by a second SIGINT" in flat(result.stderr)
    run = tmp_path / "run"
    assert load_checkpoint(run)["step"] == 1  # the one on disk, untouched
    assert not [p for p in run.iterdir() if p.name.startswith(".tmp-")]
    assert signal.getsignal(signal.SIGINT) == before  # the run's handlers are gone


def test_sizes_that_would_exhaust_memory_are_refused_before_any_work(tmp_path, monkeypatch):
    """On a 20 KB corpus --batch-size 1000000 and --window 100000000 passed 8 GB in a
    minute; --shuffle-buffer 1000000000 got the process killed for memory at 24 GB."""
    monkeypatch.setattr(memory, "available_memory", lambda: 8 * 2**30)
    base = tiny_config(tmp_path)
    for flag, value in (("--batch-size", "1000000"), ("--window", "100000000"),
                        ("--shuffle-buffer", "1000000000")):
        result = runner.invoke(app, ["pretrain", *base.train, "--output", str(tmp_path / "r"),
                                     "--max-steps", "2", flag, value])
        assert result.exit_code == 1, result.output
        message = flat(result.stderr)
        assert "[E171]" in message and "more than the 8.0 GB available" in message, message
        assert not (tmp_path / "r").exists()
    need = memory.step_bytes(base, base.bilm_options()) + base.shuffle_buffer * 600
    monkeypatch.setattr(memory, "available_memory", lambda: int(1.5 * need))
    with pytest.warns(UserWarning, match=r"\[W027\] .* more than half of the"):
        memory.check_memory(base, torch.device("cpu"))


def test_a_resume_makes_only_what_a_stop_left_undone(tmp_path):
    """A snapshot deleted on purpose (to free disk) is not made again by a resume."""
    settings = dict(max_steps=4, eval_every=2, snapshot_every=2, dev_max_tokens=6,
                    batch_size=2, window=4, checkpoint_every=100)
    train(tiny_config(tmp_path, **settings), progress=False)
    run = tmp_path / "run"
    assert load_checkpoint(run)["pending"] == []
    for snap in (run / "snapshots").iterdir():
        shutil.rmtree(snap)
    train(tiny_config(tmp_path, **{**settings, "max_steps": 6}), resume=True, progress=False)
    assert sorted(p.name for p in (run / "snapshots").iterdir()) == ["step_0000006"]
