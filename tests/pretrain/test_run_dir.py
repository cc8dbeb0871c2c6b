"""A run directory's life: --overwrite replaces all of a run, a failed start blocks
nothing, a stopped run exits non-zero, resumes are checked, checkpoints are verified, and
skipped lines are reported."""

import json
import signal

import pytest
import torch
from typer.testing import CliRunner

from spacy_elmo.cli import app
from spacy_elmo.errors import ElmoError, ElmoWarning
from spacy_elmo.pretrain import trainer as trainer_module
from spacy_elmo.pretrain.checkpoint import CHECKSUM, load_checkpoint
from spacy_elmo.pretrain.trainer import Trainer, train

from .conftest import TINY_OPTIONS, tiny_config, write_corpus

runner = CliRunner()


def run(config, **kwargs):
    return train(config, progress=False, **kwargs)


def flat(text):
    return " ".join(text.split())


def quick(tmp_path, **changes):
    """The tiny test config without dev text (no evaluations: faster)."""
    return tiny_config(tmp_path, **{"dev": [], **changes})


@pytest.fixture(autouse=True)
def no_curves(monkeypatch):
    """Drawing curves.png takes about a second a run and is not what these tests check."""
    monkeypatch.setattr(trainer_module, "draw_curves", lambda metrics, png: True)


def test_overwrite_replaces_the_whole_run(tmp_path):
    """--overwrite kept the old run's snapshots/, so a later curve mixed two runs."""
    out = tmp_path / "run"
    run(quick(tmp_path, max_steps=4, eval_every=2, checkpoint_every=2, snapshot_every=2))
    assert sorted(p.name for p in (out / "snapshots").iterdir()) == [
        "step_0000002", "step_0000004"]
    (out / "notes.txt").write_text("mine")  # not a file of the run: kept
    run(quick(tmp_path, max_steps=3, eval_every=3, checkpoint_every=3), overwrite=True)
    assert not (out / "snapshots").exists()
    assert (out / "notes.txt").read_text() == "mine"
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert max(r["step"] for r in records) == 3 and records[0]["step"] <= 2
    assert load_checkpoint(out)["step"] == 3


@pytest.mark.parametrize("broken", [{"dev": ["missing_dev.txt"]}, {"n_negatives": 500}])
def test_a_start_that_fails_its_checks_writes_nothing(tmp_path, broken):
    """A failed start left vocab.txt, then said "pass --resume", and --resume failed too."""
    out = tmp_path / "run"
    with pytest.raises(ElmoError):
        run(quick(tmp_path, **broken))
    assert not out.exists()
    assert run(quick(tmp_path, max_steps=2)).step == 2


def test_a_start_that_crashed_blocks_neither_a_new_start_nor_resume(tmp_path, monkeypatch):
    """Leftovers of a start that died before its first checkpoint (config.json,
    vocab.txt) are replaced by the next start or by --resume (which then starts)."""
    out = tmp_path / "run"

    def crash(self):
        raise RuntimeError("out of memory")

    with monkeypatch.context() as patch:
        patch.setattr(Trainer, "train_step", crash)
        with pytest.raises(RuntimeError):
            run(quick(tmp_path))
    assert {p.name for p in out.iterdir()} >= {"vocab.txt", "config.json"}
    assert not (out / "checkpoint.pt").exists()
    (out / "train.log").write_text("a log beside the run")
    result = runner.invoke(app, [
        "pretrain", str(tmp_path / "corpus.txt"), "--output", str(out), "--resume",
        "--vocab-size", "40", "--n-negatives", "8", "--batch-size", "2", "--window",
        "4", "--max-steps", "2", "--options", json.dumps(TINY_OPTIONS)])
    assert result.exit_code == 0, result.output
    assert load_checkpoint(out)["step"] == 2
    assert (out / "train.log").read_text() == "a log beside the run"
    with pytest.raises(ElmoError, match="already holds a pretraining run"):
        run(quick(tmp_path))  # a run with a checkpoint is refused


def _snapshot(directory):
    return {p.relative_to(directory): p.read_bytes() for p in directory.rglob("*")
            if p.is_file()}


@pytest.mark.parametrize("broken", [{"train": ["empty.txt"]}, {"n_negatives": 500},
                                    {"dev": ["missing_dev.txt"]}])
def test_overwrite_that_fails_keeps_the_old_run(tmp_path, broken):
    """--overwrite cleared the old run first, then failed: the run was gone."""
    (tmp_path / "empty.txt").write_text("")
    run(quick(tmp_path, max_steps=2))
    before = _snapshot(tmp_path / "run")
    with pytest.raises(ElmoError):
        run(quick(tmp_path, max_steps=2, **broken), overwrite=True)
    assert _snapshot(tmp_path / "run") == before


def test_inputs_inside_the_run_directory_are_refused_not_deleted(tmp_path):
    """--overwrite --init-weights RUN/model deleted the model, then failed with "No such
    file"; --vocab RUN/vocab.txt deleted the user's vocabulary."""
    out = tmp_path / "run"
    run(quick(tmp_path, max_steps=2))
    before = _snapshot(out)
    with pytest.raises(ElmoError, match=r"--init-weights '.*model' lies inside the run "
                                        r"directory .* replaces 'model'"):
        run(quick(tmp_path, max_steps=2, init_weights=str(out / "model")), overwrite=True)
    assert _snapshot(out) == before
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "vocab.txt").write_text("<S>\n</S>\n<UNK>\nthe\t90\n")
    with pytest.raises(ElmoError, match=r"--vocab .* replaces 'vocab.txt'"):
        run(quick(tmp_path, max_steps=2, vocab=str(mine / "vocab.txt"), output=str(mine)))
    assert (mine / "vocab.txt").read_text().endswith("the\t90\n")


@pytest.mark.parametrize("resume", [False, True])
def test_a_directory_of_other_files_is_refused(tmp_path, resume):
    """An export (options.json, weights.hdf5, vocab.txt) as --output: its vocab.txt was
    replaced without --overwrite; --resume there 'started the run' the same way."""
    run(quick(tmp_path, max_steps=2))
    export = tmp_path / "run" / "model"
    before = _snapshot(export)
    args = ["pretrain", str(tmp_path / "corpus.txt"), "--output", str(export), "--max-steps",
            "2", "--options", json.dumps(TINY_OPTIONS), "--vocab-size", "40",
            "--n-negatives", "8"] + (["--resume"] if resume else ["--overwrite"])
    result = runner.invoke(app, args)
    assert result.exit_code == 1
    assert "holds files that are not a pretraining run's (options.json, softmax.hdf5" in \
        flat(result.stderr)
    assert _snapshot(export) == before
    own = tmp_path / "own"
    own.mkdir()
    (own / "config.json").write_text('{"my": "settings"}')
    with pytest.raises(ElmoError, match=r"not a pretraining run's \(config.json\)"):
        run(quick(tmp_path, max_steps=2, output=str(own)))


def test_resume_and_overwrite_together_are_refused(tmp_path):
    run(quick(tmp_path, max_steps=2))
    with pytest.raises(ElmoError, match="--resume and --overwrite contradict each other"):
        run(quick(tmp_path, max_steps=3), resume=True, overwrite=True)
    result = runner.invoke(app, ["pretrain", "--output", str(tmp_path / "run"), "--resume",
                                 "--overwrite"])
    assert result.exit_code == 1 and "contradict each other" in flat(result.stderr)
    assert load_checkpoint(tmp_path / "run")["step"] == 2


def test_export_does_not_replace_a_model_without_overwrite(tmp_path):
    run(quick(tmp_path, max_steps=2))
    target = tmp_path / "export"
    assert runner.invoke(app, ["export", str(tmp_path / "run"), str(target)]).exit_code == 0
    before = _snapshot(target)
    (target / "weights.hdf5").write_bytes(b"mine")
    result = runner.invoke(app, ["export", str(tmp_path / "run"), str(target)])
    assert result.exit_code == 1 and "already exists. Pass --overwrite" in flat(result.stderr)
    assert (target / "weights.hdf5").read_bytes() == b"mine"
    result = runner.invoke(app, ["export", str(tmp_path / "run"), str(target), "--overwrite"])
    assert result.exit_code == 0, result.output
    assert _snapshot(target) == before


@pytest.mark.parametrize("content, match", [
    (b"the\ncat\nthe\n", r"lists 'the' more than once \(lines 1 and 3\)"),
    (b"the\ncaf\xe9\n", r"Line 2 of .* is not valid UTF-8"),
    (None, "is a directory or not readable")])
def test_a_bad_vocabulary_file_is_named(tmp_path, content, match):
    vocab = tmp_path / "vocab_in.txt"
    if content is None:
        vocab.mkdir()
    else:
        vocab.write_bytes(content)
    with pytest.raises(ElmoError, match=match):
        run(quick(tmp_path, max_steps=2, vocab=str(vocab), n_negatives=1))
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_stopped_run_exits_non_zero_and_says_how_to_resume(tmp_path, monkeypatch, signum):
    """A stopped run exited 0, so `pretrain && export` or a scheduler took it for done."""
    original = Trainer.train_step

    def step_then_signal(self):
        loss = original(self)
        if self.step == 2:
            signal.raise_signal(signum)
        return loss

    monkeypatch.setattr(Trainer, "train_step", step_then_signal)
    config = tmp_path / "run.cfg"
    config.write_text(quick(tmp_path, max_steps=6).to_cfg())
    with pytest.warns(ElmoWarning) as caught:
        result = runner.invoke(app, ["pretrain", str(config)])
    assert result.exit_code == 128 + signum, result.output
    name = signal.Signals(signum).name
    assert (f"Stopped by {name} at step 2; checkpoint saved. Continue with: spacy-elmo "
            f"pretrain --output {tmp_path / 'run'} --resume") in [flat(str(w.message))
                                                                  for w in caught][-1]
    assert load_checkpoint(tmp_path / "run")["step"] == 2
    assert not (tmp_path / "run" / "model").exists()


def test_resume_with_another_optimizer_is_refused(tmp_path):
    """It failed with KeyError: 'betas' deep in torch."""
    run(quick(tmp_path, max_steps=2))
    with pytest.raises(ElmoError, match=r"made with optimizer = 'adagrad', but this command "
                                        r"asks for 'adam'"):
        run(quick(tmp_path, max_steps=4, optimizer="adam"), resume=True)
    assert run(quick(tmp_path, max_steps=3), resume=True).step == 3


def test_output_and_export_targets_that_are_files(tmp_path):
    corpus = write_corpus(tmp_path / "corpus.txt", n_lines=20)
    taken = tmp_path / "taken"
    taken.write_text("a file")
    result = runner.invoke(app, ["pretrain", str(corpus), "--output", str(taken)])
    assert result.exit_code == 1
    assert "'" + str(taken) + "' is a file, but a directory is needed" in flat(result.stderr)
    run(quick(tmp_path, max_steps=2))
    result = runner.invoke(app, ["export", str(tmp_path / "run"), str(taken)])
    assert result.exit_code == 1
    assert "is a file, but a directory is needed" in flat(result.stderr)
    assert taken.read_text() == "a file"


def test_checkpoint_damage_is_found_and_checkpoints_without_a_checksum_refused(tmp_path):
    """Corrupted tensor bytes loaded silently (loss 38, perplexity 1e28). Checkpoints
    written before checksums existed (spacy-elmo 0.1) are refused, not loaded unchecked."""
    run(quick(tmp_path, max_steps=2))
    path = tmp_path / "run" / "checkpoint.pt"
    data = torch.load(path, weights_only=True)
    intact = path.read_bytes()
    needle = data["model"]["softmax.weight"].numpy().tobytes()[:64]
    at = intact.find(needle)
    assert at > 0
    path.write_bytes(intact[: at + 3] + bytes([intact[at + 3] ^ 0x40]) + intact[at + 4 :])
    with pytest.raises(ElmoError, match="is damaged: its content does not match the checksum"):
        load_checkpoint(path)
    with pytest.raises(ElmoError, match="is damaged"):
        run(quick(tmp_path, max_steps=4), resume=True)
    del data[CHECKSUM]
    torch.save(data, path)
    with pytest.raises(ElmoError, match=r"\[E251\] .* \(no checksum, not the checksum"):
        load_checkpoint(path)


class Foreign:
    pass


@pytest.mark.parametrize("content", ["object", "garbage"])
def test_unloadable_checkpoint_message_gives_no_unsafe_advice(tmp_path, content):
    path = tmp_path / "checkpoint.pt"
    if content == "object":
        torch.save({"format": "spacy-elmo-pretrain/1", "x": Foreign()}, path)
    else:
        path.write_bytes(b"PK\x03\x04" + b"\x00" * 100)
    with pytest.raises(ElmoError, match="is not a pretraining checkpoint") as info:
        load_checkpoint(path)
    assert "weights_only" not in str(info.value)
    assert info.value.__cause__ is None and info.value.__suppress_context__


def test_lines_that_are_not_utf8_are_reported(tmp_path):
    """Pretraining and perplexity skipped them without a word (embed reports them)."""
    corpus = write_corpus(tmp_path / "corpus.txt", n_lines=60)
    with corpus.open("ab") as f:
        f.write(b"caf\xe9 au lait .\n\xff\xfe binary .\n")
    with pytest.warns(UserWarning, match=r"2 line\(s\) of .* are not UTF-8 text .*counting "
                                         r"the vocabulary"):
        run(quick(tmp_path, max_steps=2))
    export = tmp_path / "export"
    assert runner.invoke(app, ["export", str(tmp_path / "run"), str(export)]).exit_code == 0
    with pytest.warns(UserWarning, match=r"2 line\(s\) .* dev/perplexity text"):
        result = runner.invoke(app, ["perplexity", str(export), str(corpus)])
    assert result.exit_code == 0, result.output
