"""One validation layer: every setting a user writes is checked for type and range, and the
error names the key, what it must be, and the fix. Nothing is silently read as something
else ("false" as true, "file.txt" as a list of letters)."""

import json
import re
from dataclasses import fields

import pytest
import spacy
from typer.testing import CliRunner

from spacy_elmo.bilm import BiLMOptions, load_bilm, save_bilm
from spacy_elmo.cli import app
from spacy_elmo.errors import ElmoError
from spacy_elmo.pretrain.config import PretrainConfig
from spacy_elmo.pretrain.declaration import declared

from .conftest import TINY_OPTIONS, make_random_bilm

runner = CliRunner()


def flat(text: str) -> str:
    return " ".join(text.split())


@pytest.fixture(scope="module")
def blank_nlp():
    """One blank pipeline for the tests whose add_pipe fails (and so adds nothing)."""
    return spacy.blank("en")


@pytest.fixture
def options_dir(tmp_path):
    save_bilm(make_random_bilm(), tmp_path)
    return tmp_path


def write_options(directory, section, key, value):
    path = directory / "options.json"
    data = json.loads(path.read_text())
    data[section][key] = value
    path.write_text(json.dumps(data))


@pytest.mark.parametrize("section,key,value,message", [
    ("lstm", "use_skip_connections", "false",
     r"use_skip_connections \(lstm.use_skip_connections\) must be true or false, got "
     r"'false' \(a string\). Write false without quotes."),
    ("lstm", "cell_clip", "3", r"cell_clip \(lstm.cell_clip\) must be a positive number or "
                               r"null, got '3' \(a string\). Write 3 without quotes."),
    ("lstm", "proj_clip", [3], r"got \[3\] \(a list\). Write a single value, 3, not a list."),
    ("lstm", "dim", 12.0, r"lstm_dim \(lstm.dim\) must be a positive integer, got 12.0. "
                          r"Write 12, not 12.0."),
    ("lstm", "n_layers", -1, r"n_layers \(lstm.n_layers\) must be a positive integer"),
    ("char_cnn", "filters", [["1", 4], [2, 4], [3, 8]], r"char_cnn.filters\) must be a "
                                                        r"non-empty list of \[width, n_filters\]"),
    ("char_cnn", "filters", [[1.5, 4]], r"pairs of positive integers"),
    ("char_cnn", "n_highway", True, r"n_highway \(char_cnn.n_highway\) must be an integer >= 0"),
])
def test_options_json_types(options_dir, section, key, value, message):
    write_options(options_dir, section, key, value)
    with pytest.raises(ElmoError, match=message):
        load_bilm(options_dir)


def test_the_fixture_and_bundled_options_still_load(fixture_dir):
    from spacy_elmo.bilm.io.sources import bundled

    fixture = BiLMOptions.from_file(fixture_dir / "options.json")
    assert (fixture.lstm_dim, fixture.projection_dim, fixture.n_highway, fixture.n_layers,
            len(fixture.filters)) == (64, 16, 2, 2, 5)
    small = BiLMOptions.from_file(bundled("en") / "options.json")
    assert (small.lstm_dim, small.projection_dim, small.n_highway, small.n_layers,
            small.n_filters) == (512, 128, 1, 2, 512)


def test_options_overrides_unknown_key():
    with pytest.raises(ElmoError, match=r"Unknown key\(s\) \['lstm_dims'\] in the biLM options"):
        TINY_OPTIONS.replace(lstm_dims=3)


def test_every_pretraining_setting_has_a_rule():
    """Each field is declared once with its section, rule and help, and its default passes
    its own rule."""
    items = declared(PretrainConfig)
    assert [item.name for item in items] == [f.name for f in fields(PretrainConfig)]
    for item in items:
        assert item.section and item.help
        assert (item.default is None and item.rule.optional) or item.rule.ok(item.default)


@pytest.mark.parametrize("changes,message", [
    ({"dropout": "0.1"}, r"dropout must be a number in \[0, 1\), got '0.1' \(a string\). "
                         r"Write 0.1 without quotes."),
    ({"train": "file.txt"}, r"train must be a list of strings, got 'file.txt' \(a string\). "
                            r'Write a list: \["file.txt"\].'),
    ({"batch_size": 8.0}, r"batch_size must be a positive integer, got 8.0. Write 8"),
    ({"batch_size": "8"}, r"batch_size must be a positive integer, got '8' \(a string\)"),
    ({"sum_over_steps": "false"}, r"sum_over_steps must be true or false.*Write false"),
    ({"window": -3}, r"window must be a positive integer, got -3"),
    ({"skip_pattern": "(unclosed"}, r"skip_pattern must be a valid regular expression"),
    ({"options": [["lstm_dim", 3]]}, r"options must be an object of key-value pairs"),
    ({"options": {"lstm_dims": 3}}, r"Unknown key\(s\) \['lstm_dims'\] in 'options'"),
    ({"options": {"cell_clip": "3"}}, r"cell_clip \(lstm.cell_clip\) must be a positive number"),
])
def test_pretraining_config_file_types(tmp_path, changes, message):
    values = {"train": ["corpus.txt"], **changes}
    sections = {}
    for item in declared(PretrainConfig):
        if item.name in values:
            sections.setdefault(item.section, []).append(
                f"{item.name} = {json.dumps(values[item.name])}")
    path = tmp_path / "p.cfg"
    path.write_text("".join(f"[{name}]\n" + "\n".join(lines) + "\n\n"
                            for name, lines in sections.items()))
    with pytest.raises(ElmoError, match=message):
        PretrainConfig.from_file(path)
    record = tmp_path / "config.json"  # a run's record of its settings: the same rules
    record.write_text(json.dumps(values))
    with pytest.raises(ElmoError, match=message):
        PretrainConfig.from_record(record)


def test_a_run_record_that_is_not_an_object(tmp_path):
    path = tmp_path / "config.json"
    path.write_text("[1, 2]")
    with pytest.raises(ElmoError, match="the top level is not an object"):
        PretrainConfig.from_record(path)


@pytest.mark.parametrize("options,message", [
    ("{lstm_dim: 3}", r"--options '\{lstm_dim: 3\}' is not a JSON object of option "
                      r"overrides \(Expecting property name"),
    ('[["lstm_dim", 3]]', r"is not a JSON object of option overrides \(not a JSON object\)"),
    ('{"lstm_dims": 3}', r"Unknown key\(s\) \['lstm_dims'\] in 'options'"),
    ('{"use_skip_connections": "false"}', r"must be true or false"),
])
def test_pretrain_options_flag(tmp_path, options, message):
    (tmp_path / "c.txt").write_text("a b c .\n")
    result = runner.invoke(app, ["pretrain", str(tmp_path / "c.txt"), "--output",
                                 str(tmp_path / "run"), "--options", options])
    assert result.exit_code == 1, result.output
    assert result.stdout == ""
    assert re.search(message, flat(result.stderr)), result.stderr
    assert not (tmp_path / "run").exists()  # nothing written


@pytest.mark.parametrize("model,message", [
    ({"word_cache_size": -1}, r"ElmoModel.v1 word_cache_size must be an integer >= 0"),
    ({"output_cache_mb": -5}, r"ElmoModel.v1 output_cache_mb must be a number >= 0"),
    ({"dropout": 5}, r"ElmoModel.v1 dropout must be a number in \[0, 1\), got 5"),
    ({"batch_size": 0}, r"ElmoModel.v1 batch_size must be a positive integer, got 0"),
])
def test_model_settings_fail_at_construction(blank_nlp, tiny_weights_dir, model, message):
    nlp = blank_nlp
    with pytest.raises(ElmoError, match=message):
        nlp.add_pipe("elmo", config={"weights": str(tiny_weights_dir), "model": {
            "@architectures": "spacy-elmo.ElmoModel.v1", **model}})


@pytest.mark.parametrize("config,message", [
    ({"mix_weights": []}, r"\[components.elmo\] mix_weights must be a non-empty list of "
                          r"numbers >= 0 with a positive sum or null, got \[\] \(a list\)"),
    ({"mix_weights": [0, 0]}, r"mix_weights must be a non-empty list"),
    ({"mix_weights": [1, -1, 1]}, r"mix_weights must be a non-empty list"),
])
def test_component_settings_fail_at_construction(blank_nlp, tiny_weights_dir, config,
                                                 message):
    nlp = blank_nlp
    with pytest.raises(ElmoError, match=message):
        nlp.add_pipe("elmo", config={"weights": str(tiny_weights_dir), **config})


def test_mix_weights_of_the_wrong_length_fail_when_the_biLM_loads(tiny_weights_dir):
    nlp = spacy.blank("en")
    nlp.add_pipe("elmo", config={"weights": str(tiny_weights_dir), "mix_weights": [1, 2]})
    with pytest.raises(ElmoError, match=r"\[E058\] .* mix_weights has 2 number\(s\), but "
                                        r"this biLM has 3 layers"):
        nlp.initialize()
    with pytest.raises(ElmoError, match=r"\[E058\]"):  # and at every later use
        nlp("a b")


def test_perplexity_output_that_cannot_be_written_fails_before_the_work(tmp_path):
    (tmp_path / "a_file").write_text("x")
    result = runner.invoke(app, ["perplexity", str(tmp_path / "no_model"),
                                 str(tmp_path / "t.txt"), "--output",
                                 str(tmp_path / "a_file" / "out.json")])
    assert result.exit_code == 1, result.output
    assert (f"[E009] Cannot write '{tmp_path / 'a_file' / 'out.json'}': '{tmp_path / 'a_file'}'"
            f" is a file, not a directory" in flat(result.stderr))


@pytest.mark.parametrize("flag,value,message", [
    ("--rows", "0", "--rows must be a positive integer, got 0"),
    ("--window", "0", "--window must be a positive integer, got 0"),
    ("--max-tokens", "-5", "--max-tokens must be a positive integer or null, got -5"),
    ("--threads", "-1", "--threads must be an integer in [1, 1024] or null, got -1"),
])
def test_perplexity_sizes(tmp_path, flag, value, message):
    result = runner.invoke(app, ["perplexity", str(tmp_path), str(tmp_path / "t.txt"),
                                 flag, value])
    assert result.exit_code == 1, result.output
    assert message in flat(result.stderr)


def test_embed_word_cache_must_not_be_negative(tmp_path, tiny_weights_dir):
    (tmp_path / "in.txt").write_text("a\n")
    result = runner.invoke(app, ["embed", str(tmp_path / "in.txt"), str(tmp_path / "o.hdf5"),
                                 "--weights", str(tiny_weights_dir), "--word-cache", "-1"])
    assert result.exit_code == 1
    assert "--word-cache must be an integer >= 0, got -1" in flat(result.stderr)
