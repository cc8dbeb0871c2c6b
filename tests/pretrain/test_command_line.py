"""`spacy-elmo pretrain`'s own command-line reading (pretrain/declaration.py and config.py, no
private spaCy API): overrides read as `spacy train` reads them, shortcut flags as their
setting's type, the config file and the training text among the positionals."""

import pytest

from spacy_elmo.errors import ElmoError
from spacy_elmo.pretrain.config import PretrainConfig, read_command_line
from spacy_elmo.pretrain.declaration import parse_command_line, parse_override


@pytest.mark.parametrize("text,value", [
    ("12", 12), ("0.5", 0.5), ("-3", -3), ("true", True), ("null", None),
    ('"12"', "12"), ("[1, 2]", [1, 2]), ('{"lstm_dim": 8}', {"lstm_dim": 8}),
    ("runs/en", "runs/en"), ("^= .* =$", "^= .* =$"), ("{not json", "{not json"), ("", ""),
    (None, True),  # the flag alone
])
def test_an_override_is_json_else_its_text(text, value):
    assert parse_override(text) == value


def parse(*args):
    return parse_command_line(PretrainConfig, list(args))


def test_overrides_and_shortcuts_in_order_with_how_they_were_written():
    positionals, overrides = parse("a.txt", "--training.max_steps", "7", "--lr=0.5",
                                   "--paths.output", "runs/x", "b.txt", "--corpus.lang=zh",
                                   "--model.options.lstm_dim", "16")
    assert positionals == ["a.txt", "b.txt"]
    assert overrides == [("training.max_steps", 7, "--training.max_steps"),
                         ("optimizer.lr", 0.5, "--lr"),
                         ("paths.output", "runs/x", "--paths.output"),
                         ("corpus.lang", "zh", "--corpus.lang"),
                         ("model.options.lstm_dim", 16, "--model.options.lstm_dim")]


def test_a_list_setting_gathers_its_values_from_all_its_flags():
    positionals, overrides = parse("--dev", "a", "b", "--max-steps", "3", "--paths.dev", "c",
                                   '["d", "e"]', "--dev=f")
    assert positionals == []
    assert overrides == [("paths.dev", ["a", "b", "c", "d", "e", "f"], "--dev"),
                         ("training.max_steps", 3, "--max-steps")]


def test_a_true_false_setting_takes_a_true_false_word_or_stands_alone():
    _, overrides = parse("--split-sentences", "no", "--sum-over-steps", "a.txt",
                         "--corpus.split_sentences", "--training.sum_over_steps", "0")
    assert [value for _, value, _ in overrides] == [False, True, True, 0]
    assert parse("--split-sentences", "a.txt")[0] == ["a.txt"]  # not its value
    # the same for --section.key (spaCy's override parser takes any next word as the value)
    assert parse("--corpus.split_sentences", "a.txt") == (
        ["a.txt"], [("corpus.split_sentences", True, "--corpus.split_sentences")])


@pytest.mark.parametrize("args,code", [
    (["--max-step", "3"], "E127"), (["--max-steps"], "E132"), (["--dev"], "E132"),
    (["--device", "cpu"], "E127"),
])
def test_unknown_flags_and_missing_values(args, code):
    with pytest.raises(ElmoError, match=rf"\[{code}\]"):
        parse(*args)


def test_the_config_file_and_the_training_text(tmp_path):
    path, overrides = read_command_line(["p.cfg", "a.txt", "--train", "b.txt", "--max-steps",
                                         "2", "c.txt"])
    assert str(path) == "p.cfg"
    assert overrides == [("paths.train", ["a.txt", "c.txt", "b.txt"], "--train"),
                         ("training.max_steps", 2, "--max-steps")]
    path, overrides = read_command_line(["a.txt", "b.txt"])
    assert path is None and overrides == [("paths.train", ["a.txt", "b.txt"], "TEXT")]
    path, _ = read_command_line(["old.json", "a.txt"])  # a config to refuse, not text
    assert str(path) == "old.json"
    (tmp_path / "text.cfg").mkdir()  # a directory so named is training text
    path, overrides = read_command_line([str(tmp_path / "text.cfg")])
    assert path is None and overrides[0][1] == [str(tmp_path / "text.cfg")]
    with pytest.raises(ElmoError, match=r"\[E253\] 'p.cfg'"):  # a config comes first
        read_command_line(["a.txt", "p.cfg"])
