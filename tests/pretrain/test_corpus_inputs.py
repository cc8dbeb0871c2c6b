"""One rule for the text a command reads (pretrain's train and dev, perplexity's TEXT): an
empty path is an error, every value after --dev is dev text, and no file of a pretraining
run or a biLM directory is ever read as text."""

import json

import pytest
from spacy_elmo_lab.tiny import make_random_bilm
from typer.testing import CliRunner

from spacy_elmo.bilm import save_bilm
from spacy_elmo.cli import app
from spacy_elmo.errors import ElmoError
from spacy_elmo.pretrain.checkpoint import load_checkpoint
from spacy_elmo.pretrain.corpus import resolve_files

from .conftest import TINY_OPTIONS, flat, resolved, write_corpus

runner = CliRunner()


pytestmark = pytest.mark.usefixtures("no_curves")


def pretrain(*args):
    return runner.invoke(app, [
        "pretrain", *map(str, args), "--options", json.dumps(TINY_OPTIONS), "--vocab-size",
        "40", "--n-negatives", "8", "--batch-size", "2", "--window", "4", "--shuffle-buffer",
        "20", "--checkpoint-every", "2", "--max-steps", "2"])


def test_every_value_after_dev_is_dev_text(tmp_path):
    """`pretrain tiny.cfg train.txt --dev dev.txt big.txt` trained on big.txt."""
    cfg = tmp_path / "tiny.cfg"
    cfg.write_text("[training]\nmax_steps = 3\n")
    config = resolved(cfg, "train.txt", "--dev", "dev.txt", "big.txt")
    assert (config.train, config.dev) == (["train.txt"], ["dev.txt", "big.txt"])
    # every form of a list setting adds to the one list, in order
    assert resolved("t.txt", "--dev", "a", "--paths.dev", "b", "--dev", "c").dev == [
        "a", "b", "c"]
    assert resolved("t.txt", "--dev", '["a", "b"]').dev == ["a", "b"]
    assert resolved("t.txt", "--train", "u.txt", "v.txt", "--max-steps", "4").train == [
        "t.txt", "u.txt", "v.txt"]
    result = runner.invoke(app, ["pretrain", "t.txt", "--dev", "--max-steps", "4"])
    assert result.exit_code == 1 and "[E132] --dev needs a value" in flat(result.stderr)


def test_an_empty_path_is_an_error_not_the_working_directory(tmp_path, monkeypatch):
    """`pretrain tiny.cfg --train "" --dev ""` (an unset $CORPUS) trained on every .txt
    under the working directory."""
    monkeypatch.chdir(tmp_path)
    write_corpus(tmp_path / "notes.txt", n_lines=60)
    result = pretrain("--train", "", "--dev", "", "--output", "run")
    assert result.exit_code == 1
    assert "[E165] An empty path was given as training text ('')" in flat(result.stderr)
    assert not (tmp_path / "run").exists()
    result = pretrain("notes.txt", "--dev", " ", "--output", "run")
    assert result.exit_code == 1 and "[E165] An empty path was given as dev text" in flat(
        result.stderr)
    for patterns in ([""], ["notes.txt", "  "]):
        with pytest.raises(ElmoError, match=r"\[E165\]"):
            resolve_files(patterns)


def test_no_file_of_a_run_or_a_biLM_directory_is_read_as_text(tmp_path):
    """Two runs inside one corpus directory: run2 trained on run1/vocab.txt and
    run1/model/vocab.txt, and run1 could no longer be resumed (E142 named run2's files)."""
    corpus = tmp_path / "cdir"
    corpus.mkdir()
    write_corpus(corpus / "a.txt", n_lines=60)
    save_bilm(make_random_bilm(), corpus / "bilm")  # a biLM kept beside the text
    (corpus / "bilm" / "vocab.txt").write_text("<S>\n</S>\n<UNK>\nzebra\n")
    size = (corpus / "a.txt").stat().st_size
    for run in ("run1", "run2"):
        with pytest.warns(UserWarning, match=r"\[W018\]"):
            result = pretrain(corpus, "--output", corpus / run)
        assert result.exit_code == 0, result.output
        assert load_checkpoint(corpus / run)["frozen"]["train_files"] == [["a.txt", size]]
        assert "zebra" not in (corpus / run / "vocab.txt").read_text()
    with pytest.warns(UserWarning, match=r"\[W018\]"):
        result = pretrain(corpus, "--output", corpus / "run1", "--resume", "--max-steps", "4")
    assert result.exit_code == 0, result.output
    with pytest.warns(UserWarning, match=r"\[W026\] 3 director\(ies\) inside the corpus"):
        assert resolve_files([str(corpus)]) == [corpus / "a.txt"]
    with pytest.warns(UserWarning, match=r"\[W026\]"):
        assert resolve_files([str(corpus / "**" / "*.txt")]) == [corpus / "a.txt"]
    # named as such, a run's or a biLM's file is refused, not read
    for path in (corpus / "run1" / "vocab.txt", corpus / "run2" / "model" / "vocab.txt",
                 corpus / "bilm" / "vocab.txt"):
        with pytest.raises(ElmoError, match=r"\[E166\] .* lies inside a (pretraining run|"
                                            r"biLM directory)"):
            resolve_files([str(path)])
    result = runner.invoke(app, ["perplexity", str(corpus / "run1" / "model"),
                                 str(corpus / "run2" / "vocab.txt")])
    assert result.exit_code == 1 and "[E166]" in result.stderr
