"""The pretraining command line at its edges: true/false values, config names that
init-pretrain-config writes, --resume with a vocabulary, huge numbers."""

import pytest
from typer.testing import CliRunner

from spacy_elmo.cli import app

from .conftest import flat, resolved

runner = CliRunner()


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


def test_init_pretrain_config_writes_a_name_pretrain_reads_as_a_config(tmp_path):
    """Without .cfg, the printed `spacy-elmo pretrain mycfg TEXT...` trained on the config
    file as text; named x2.json, it held .cfg text and the suggested command failed (E002)."""
    result = runner.invoke(app, ["init-pretrain-config", str(tmp_path / "mycfg")])
    assert result.exit_code == 0, result.output
    written = tmp_path / "mycfg.cfg"
    assert written.is_file() and not (tmp_path / "mycfg").exists()
    assert f"spacy-elmo pretrain {written} TEXT" in flat(result.stdout)
    config = resolved(written, "t.txt")
    assert config.train == ["t.txt"] and config == resolved("t.txt")
    result = runner.invoke(app, ["init-pretrain-config", str(tmp_path / "x2.json")])
    assert result.exit_code == 1 and "[E169]" in result.stderr
    assert f"'{tmp_path / 'x2.cfg'}'" in flat(result.stderr)
    assert not (tmp_path / "x2.json").exists()


def test_resume_with_another_vocabulary_is_refused_and_not_recorded(tmp_path):
    """`--resume --vocab other.txt` was ignored but recorded in config.json, so training
    again from that config built another vocabulary."""
    from spacy_elmo.errors import ElmoError
    from spacy_elmo.pretrain.trainer import train

    from .conftest import tiny_config

    train(tiny_config(tmp_path, max_steps=2, checkpoint_every=2, dev=[]), progress=False)
    run = tmp_path / "run"
    recorded = (run / "config.json").read_text()
    other = tmp_path / "other.txt"
    other.write_text("<S>\n</S>\n<UNK>\n" + "".join(f"w{i}\n" for i in range(60)))
    with pytest.raises(ElmoError, match=r"\[E168\] Cannot resume with --vocab"):
        train(tiny_config(tmp_path, max_steps=4, dev=[], vocab=str(other)), resume=True,
              progress=False)
    assert (run / "config.json").read_text() == recorded
    same = tmp_path / "same.txt"  # the run's words under another name: they are the run's
    same.write_text((run / "vocab.txt").read_text())
    result = train(tiny_config(tmp_path, max_steps=4, dev=[], vocab=str(same)), resume=True,
                   progress=False)
    assert result.step == 4


@pytest.mark.parametrize("args,message", [
    (["pretrain", "t.txt", "--seed", str(10**23)],
     "[E112] Pretraining setting seed must be an integer in [-2147483648, 2147483647]"),
    (["pretrain", "t.txt", "--threads", "100000"],
     "[E112] Pretraining setting threads must be an integer in [1, 1024]"),
    (["embed", "t.txt", "o.hdf5", "--threads", "100000"],
     "[E020] --threads must be an integer in [1, 1024]"),
    (["perplexity", "m", "t.txt", "--threads", "100000"],
     "[E020] --threads must be an integer in [1, 1024]"),
])
def test_huge_numbers_are_refused_with_their_range(tmp_path, monkeypatch, args, message):
    """`--seed 10**23` was an OverflowError, `pretrain --threads 100000` said "spaCy has no
    language 'en'" (E114), `embed --threads 100000` crashed (exit 139)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "t.txt").write_text("a b c\n")
    result = runner.invoke(app, args)
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit), result.output
    assert message in flat(result.stderr), result.output


def test_a_run_that_lost_its_checkpoint_points_to_its_latest_export(tmp_path):
    """`--resume` printed "No checkpoint ... starting the run", then E106 "Pass --resume"."""
    from spacy_elmo.pretrain.trainer import train

    from .conftest import tiny_config

    train(tiny_config(tmp_path, max_steps=4, checkpoint_every=2, snapshot_every=2, dev=[]),
          progress=False)
    run = tmp_path / "run"
    (run / "checkpoint.pt").unlink()
    result = runner.invoke(app, ["pretrain", "--output", str(run), "--resume",
                                 "--max-steps", "6"])
    said = flat(result.output)
    assert result.exit_code == 1 and "starting the run" not in said, said
    assert "[E173] Cannot resume the run" in said
    latest = max((run / "snapshots").iterdir(), key=lambda d: int(d.name.split("_")[1]))
    assert latest.name.endswith("4") and f"--init-weights {latest} --output NEW" in said


def test_cfg_files_as_people_write_them(tmp_path):
    """A UTF-8 byte order mark and `[model.options]` without `[model]` gave E131; `--options
    '{...}'` replaced the whole [model.options] where --model.options.KEY merges."""
    bom = tmp_path / "bom.cfg"
    bom.write_bytes("\ufeff[training]\nmax_steps = 3\n".encode("utf-8"))
    assert resolved(bom, "t.txt").max_steps == 3
    sub = tmp_path / "sub.cfg"
    sub.write_text("[model.options]\nn_highway = 1\n")
    assert resolved(sub, "t.txt").options == {"n_highway": 1}
    assert resolved(sub, "t.txt", "--options", '{"lstm_dim": 256}').options == {
        "n_highway": 1, "lstm_dim": 256}
    assert resolved(sub, "t.txt", "--model.options", '{"lstm_dim": 256}').options == {
        "n_highway": 1, "lstm_dim": 256}
    assert resolved(sub, "t.txt", "--model.options.lstm_dim", "256").options == {
        "n_highway": 1, "lstm_dim": 256}


def test_nan_is_refused_without_advice_to_write_it_unquoted():
    result = runner.invoke(app, ["pretrain", "t.txt", "--optimizer.lr", "NaN", "--dry-run"])
    assert result.exit_code == 1 and "lr must be a positive number" in flat(result.stderr)
    assert "without quotes" not in result.stderr


def test_embed_with_a_language_without_a_bundled_biLM_says_to_give_weights(tmp_path):
    text = tmp_path / "in.txt"
    text.write_text("Hi .\n", encoding="utf-8")
    result = runner.invoke(app, ["embed", str(text), str(tmp_path / "o.hdf5"), "--lang", "xx"])
    said = flat(result.stderr)
    assert result.exit_code == 1 and "[E064]" in said and "give --weights" in said, said
    assert "add_pipe" not in said
