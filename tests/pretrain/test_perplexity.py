"""`spacy-elmo perplexity`: the same figure as pretraining's dev evaluation, clear errors."""

import json
import re
import shutil
from pathlib import Path

import h5py
import numpy as np
import pytest
from typer.testing import CliRunner

from spacy_elmo.cli import app
from spacy_elmo.errors import ElmoError
from spacy_elmo.pretrain.config import PretrainConfig
from spacy_elmo.pretrain.corpus import TextSettings
from spacy_elmo.pretrain.perplexity import PerplexityJob, load_lm, reading_of, text_perplexity
from spacy_elmo.pretrain.trainer import train

from .conftest import tiny_config


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ppl")
    train(tiny_config(tmp, max_steps=10, eval_every=10), progress=False)
    return tmp


def test_export_perplexity_equals_the_logged_dev_perplexity(run):
    records = [json.loads(line) for line in (run / "run" / "metrics.jsonl").open()]
    logged = [r for r in records if r["type"] == "dev"][-1]
    model, vocab = load_lm(run / "run" / "model")
    # the run's dev settings: whitespace tokens, batch_size 4 rows, window 6, 300 tokens
    got = text_perplexity(model, vocab, [run / "corpus.txt"], TextSettings(), rows=4,
                          window=6, max_tokens=300)
    assert got["dev_ppl"] == pytest.approx(logged["dev_ppl"], rel=1e-6)
    assert got["dev_ppl_fwd"] == pytest.approx(logged["dev_ppl_fwd"], rel=1e-6)
    assert got["dev_tokens"] == logged["dev_tokens"]
    # words of 1-5 letters: the same loss spread over more characters
    assert 1.0 < got["ppl_per_char"] < got["dev_ppl"]
    result = CliRunner().invoke(app, ["perplexity", str(run / "run" / "model"),
                                      str(run / "corpus.txt"), "--rows", "4", "--window", "6",
                                      "--max-tokens", "300", "--output",
                                      str(run / "ppl.json")])
    assert result.exit_code == 0, result.output
    assert f"{logged['dev_ppl']:.2f}" in result.output
    written = json.loads((run / "ppl.json").read_text(encoding="utf-8"))
    assert written["dev_ppl"] == pytest.approx(logged["dev_ppl"], rel=1e-6)
    assert written["ppl_per_char"] == pytest.approx(got["ppl_per_char"], rel=1e-6)


def test_published_layout_without_softmax_is_refused_with_the_fix(run, tmp_path):
    bare = tmp_path / "bare"
    bare.mkdir()
    for name in ("options.json", "weights.hdf5"):
        shutil.copy(run / "run" / "model" / name, bare / name)
    with pytest.raises(ElmoError, match="softmax.hdf5 or vocab.txt.*spacy-elmo export"):
        load_lm(bare)


def test_softmax_from_another_export_is_refused(run, tmp_path):
    other = tmp_path / "other"
    shutil.copytree(run / "run" / "model", other)
    with h5py.File(other / "softmax.hdf5", "r+") as f:
        del f["softmax/W"]
        f["softmax/W"] = np.zeros((7, 8), dtype="float32")
    with pytest.raises(ElmoError, match="different exports"):
        load_lm(other)


def test_text_without_known_words_is_refused(run, tmp_path):
    text = tmp_path / "foreign.txt"
    text.write_text("zzz qqq xxx\n", encoding="utf-8")
    model, vocab = load_lm(run / "run" / "model")
    with pytest.raises(ElmoError, match="no in-vocabulary words"):
        text_perplexity(model, vocab, [text], TextSettings())


@pytest.mark.parametrize("args, match", [
    (["--skip-pattern", "("], r"--skip-pattern must be a valid regular expression"),
    (["--output", "{tmp}"], r"Cannot write '.*': it is a directory")])
def test_bad_arguments_are_refused_before_the_text_is_read(run, tmp_path, monkeypatch,
                                                            args, match):
    """A bad --skip-pattern gave re.error; --output naming a directory gave
    IsADirectoryError after the whole computation."""
    import spacy_elmo.pretrain.perplexity as perplexity

    def never(*args, **kwargs):
        raise AssertionError("the model was loaded before the arguments were checked")

    monkeypatch.setattr(perplexity, "load_lm", never)
    result = CliRunner().invoke(app, ["perplexity", str(run / "run" / "model"),
                                      str(run / "corpus.txt")]
                                + [a.format(tmp=tmp_path) for a in args])
    assert result.exit_code == 1, result.output
    assert re.search(match, " ".join(result.stderr.split())), result.stderr


def test_reading_follows_the_run_and_the_settings_given():
    """What `spacy-elmo perplexity` infers (pretrain/perplexity.py, not the command)."""
    zh = PretrainConfig(train=["t.txt"], lang="zh", segmenter="jieba", split_sentences=False,
                        max_sentence_tokens=50, skip_pattern="^#")
    assert reading_of(zh) == TextSettings(lang="zh", segmenter="jieba", split_sentences=False,
                                          max_sentence_tokens=50, skip_pattern="^#")
    assert reading_of(zh, lang="en").segmenter is None  # the run's segmenter: its language
    assert reading_of(zh, segmenter="char", skip_pattern="^=").segmenter == "char"
    assert reading_of(zh, skip_pattern="^=").skip_pattern == "^="
    assert reading_of(None) == TextSettings()  # no run: whitespace tokens
    assert reading_of(None, lang="en") == TextSettings(lang="en")


@pytest.mark.parametrize("where", ["run", "run/model"])
def test_a_job_takes_what_is_not_given_from_the_run(run, where):
    job = PerplexityJob.prepare(str(run / where), [str(run / "corpus.txt")])
    assert Path(job.model) == run / "run" / "model"
    assert (job.run, job.rows, job.window) == (run / "run", 4, 6)  # the run's batching
    assert job.settings == TextSettings()  # as the run read its text
    job = PerplexityJob.prepare(str(run / where), [str(run / "corpus.txt")], rows=2,
                                window=3, lang="en")
    assert (job.rows, job.window, job.settings.lang) == (2, 3, "en")


def test_a_job_outside_a_run_and_a_run_record_that_cannot_be_read(run, tmp_path):
    copy = tmp_path / "export"
    shutil.copytree(run / "run" / "model", copy)
    job = PerplexityJob.prepare(str(copy), [str(run / "corpus.txt")])
    assert (job.run, job.rows, job.window, job.settings) == (None, 64, 20, TextSettings())
    other = tmp_path / "other"
    shutil.copytree(run / "run" / "model", other / "model")
    (other / "config.json").write_text("{not json")  # a run, but no settings to take
    job = PerplexityJob.prepare(str(other / "model"), [str(run / "corpus.txt")])
    assert (job.run, job.rows, job.window) == (other, 64, 20)
    with pytest.raises(ElmoError, match=r"\[E145\]"):
        PerplexityJob.prepare(str(copy), ["-"])
    with pytest.raises(ElmoError, match=r"--rows must be a positive integer"):
        PerplexityJob.prepare(str(copy), [str(run / "corpus.txt")], rows=0)
