"""The pretraining command line at its edges: true/false values, config names that
init-pretrain-config writes, --resume with a vocabulary, huge numbers."""

import pytest
from thinc.api import Config
from typer.testing import CliRunner

from spacy_elmo.cli import app
from spacy_elmo.pretrain.config import PretrainConfig

runner = CliRunner()


def flat(text):
    return " ".join(text.split())


def resolved(*args):
    result = runner.invoke(app, ["pretrain", *map(str, args), "--dry-run"])
    assert result.exit_code == 0, result.output
    sections = Config().from_str(result.stdout, interpolate=False)
    return PretrainConfig(**{k: v for values in sections.values() for k, v in values.items()})


@pytest.mark.parametrize("word,value", [("0", False), ("no", False), ("False", False),
                                        ("1", True), ("yes", True), ("true", True)])
def test_true_false_words_are_values_never_files(word, value):
    """`--split-sentences 0` kept the setting true and trained on a file named '0'."""
    for flag in ("--split-sentences", "--corpus.split_sentences"):
        config = resolved("t.txt", flag, word, "--max-steps", "3")
        assert (config.split_sentences, config.train) == (value, ["t.txt"]), flag
    assert resolved("--sum-over-steps", word, "t.txt").sum_over_steps is value


def test_a_number_for_a_true_false_setting_is_refused_not_read_as_text():
    result = runner.invoke(app, ["pretrain", "t.txt", "--split-sentences", "2", "--dry-run"])
    assert result.exit_code == 1
    assert "[E112] Pretraining setting split_sentences must be true or false, got '2'" in flat(
        result.stderr)
