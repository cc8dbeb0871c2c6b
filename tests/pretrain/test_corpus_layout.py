"""A run directory inside its corpus directory: its own files are never read as text, so the
run trains on the corpus only and resumes; a resume on other files names them by path."""

import json
import shutil

import pytest
from typer.testing import CliRunner

from spacy_elmo.cli import app
from spacy_elmo.errors import ElmoError
from spacy_elmo.pretrain import trainer as trainer_module
from spacy_elmo.pretrain.checkpoint import load_checkpoint
from spacy_elmo.pretrain.corpus import resolve_files
from spacy_elmo.pretrain.trainer import train

from .conftest import TINY_OPTIONS, tiny_config, write_corpus


@pytest.fixture(autouse=True)
def no_curves(monkeypatch):
    monkeypatch.setattr(trainer_module, "draw_curves", lambda metrics, png: True)


def pretrain(corpus, out, *extra):
    return CliRunner().invoke(app, [
        "pretrain", str(corpus), "--output", str(out), "--options", json.dumps(TINY_OPTIONS),
        "--vocab-size", "40", "--n-negatives", "8", "--batch-size", "2", "--window", "4",
        "--shuffle-buffer", "20", "--checkpoint-every", "2", *extra])


@pytest.mark.parametrize("pattern", ["{d}", "{d}/**/*.txt"])
def test_a_run_inside_its_corpus_directory_reads_only_the_corpus_and_resumes(tmp_path,
                                                                             pattern):
    """`pretrain DIR --output DIR/run` read DIR/run/vocab.txt as training text, and the
    run could never be resumed (E105 listed vocab.txt twice, by bare name)."""
    corpus_dir = tmp_path / "corpus"
    corpus_dir.mkdir()
    write_corpus(corpus_dir / "a.txt", n_lines=60)
    out = corpus_dir / "run"
    given = pattern.format(d=corpus_dir)
    with pytest.warns(UserWarning, match=r"\[W018\] The run directory .* lies inside the "
                                         r"corpus .*not read as training or dev text"):
        result = pretrain(given, out, "--max-steps", "2")
    assert result.exit_code == 0, result.output
    assert load_checkpoint(out)["frozen"]["train_files"] == [
        ["a.txt", (corpus_dir / "a.txt").stat().st_size]]
    with pytest.warns(UserWarning, match=r"\[W018\]"):
        result = pretrain(given, out, "--max-steps", "4", "--resume")
    assert result.exit_code == 0, result.output
    assert load_checkpoint(out)["step"] == 4
    # a file of the run named as such is still refused, not silently dropped
    with pytest.raises(ElmoError, match=r"\[E123\] The training file .*vocab.txt' lies "
                                        r"inside the run directory"):
        train(tiny_config(tmp_path, train=[str(out / "vocab.txt")], output=str(out)),
              overwrite=True, progress=False)
    # another command reading the same corpus leaves the run out too (W026 names it)
    with pytest.warns(UserWarning, match=r"\[W026\] 1 director\(ies\) inside the corpus"):
        assert resolve_files([str(corpus_dir)]) == [corpus_dir / "a.txt"]


def test_a_resume_on_other_files_names_them_by_path(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    write_corpus(data / "a.txt", n_lines=60)
    write_corpus(data / "b.txt", n_lines=40, seed=1)
    config = tiny_config(tmp_path, train=[str(data)], dev=[], max_steps=2, checkpoint_every=2)
    train(config, progress=False)
    shutil.move(data / "b.txt", tmp_path / "b.txt")
    write_corpus(data / "c.txt", n_lines=30, seed=2)
    with pytest.raises(ElmoError) as info:
        train(tiny_config(tmp_path, train=[str(data)], dev=[], max_steps=4), resume=True,
              progress=False)
    message = " ".join(str(info.value).split())
    size = (tmp_path / "b.txt").stat().st_size
    assert message.startswith(f"[E142] Cannot resume: the run in '{tmp_path / 'run'}' was "
                              "trained on other files: the checkpoint records b.txt "
                              f"({size:,} bytes), which this corpus lacks; this corpus has "
                              f"{data / 'c.txt'}, which the run did not read."), message
