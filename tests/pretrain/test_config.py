"""Pretraining settings declared once: .cfg files with --section.key overrides, the shortcut
flags that documented commands use, a run's own record of its settings, --gpu-id, --help and
the docs' table, all from the one declaration; JSON configs and the flags of spacy-elmo 0.1
refused with the way to go on."""

import itertools
import json
import re
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from spacy_elmo.cli import app
from spacy_elmo.errors import ElmoError
from spacy_elmo.pretrain.config import (
    PretrainConfig,
    default_settings,
    read_command_line,
    settings_table,
)
from spacy_elmo.pretrain.declaration import by_flag, declared

from .conftest import V1_0_PRETRAIN, as_written_by_0_1, flat, resolved

ROOT = Path(__file__).resolve().parents[2]

runner = CliRunner()


def test_docs_table_is_the_rendered_one():
    table = (ROOT / "docs" / "pretrain_settings.md").read_text(encoding="utf-8")
    assert table == settings_table(), (
        "docs/pretrain_settings.md is out of date: python -c 'from spacy_elmo.pretrain.config "
        "import settings_table; print(settings_table(), end=\"\")' > docs/pretrain_settings.md")
    for item in declared(PretrainConfig):
        assert f"| `{item.path}` |" in table


def test_help_lists_every_setting():
    result = runner.invoke(app, ["pretrain", "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    text = flat(result.output)
    for item in declared(PretrainConfig):
        assert f"--{item.path}" in text, item.path
        assert flat(item.help)[:40] in text, item.path
    assert "--gpu-id" in text


SHIPPED = sorted(p.name for p in (ROOT / "configs").glob("pretrain_*.cfg"))


def test_every_pretraining_config_is_a_cfg():
    assert len(SHIPPED) >= 8
    assert sorted((ROOT / "configs").glob("pretrain*.json")) == []


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_cfgs_dry_run_to_what_they_hold(name, monkeypatch):
    monkeypatch.chdir(ROOT)
    config = PretrainConfig.from_file(ROOT / "configs" / name)
    assert resolved(f"configs/{name}") == config
    assert config.train and config.output.startswith("runs/")  # paths of the project


@pytest.mark.parametrize("other,command", [
    ("pretrain_zh_news.cfg", "configs/pretrain_zh.cfg corpus/zhnews/train.txt.gz --dev "
     "corpus/zhnews/dev.txt --output runs/zh_news --init-weights bilm/zh_wiki --lr 0.0005 "
     "--max-steps 16000"),
    ("pretrain_en_first.cfg", "configs/pretrain_en.cfg data/lm_en/enwiki_core.train.*.txt.xz "
     "--output runs/lm_en_small --shuffle-buffer 0 --optimizer adagrad --lr 0.2 "
     "--lr-schedule constant --warmup-steps 0 --state-reset 0 --max-steps 200000 "
     "--eval-every 500 --snapshot-every null --threads 1"),
])
def test_other_recipes_are_a_shipped_cfg_with_overrides(other, command, monkeypatch):
    monkeypatch.chdir(ROOT)
    assert resolved(*command.split()) == PretrainConfig.from_file(ROOT / "configs" / other)


@pytest.mark.parametrize("exists", [True, False])
def test_a_json_config_is_refused_with_how_to_write_the_cfg(tmp_path, exists):
    """spacy-elmo 0.1 read flat JSON configs; a JSON file where a config goes is refused,
    not read as a config nor taken for training text, and nothing is written."""
    path = tmp_path / "recipe.json"
    if exists:
        path.write_text(json.dumps({"train": ["a.txt"], "max_steps": 6000}))
    with pytest.raises(ElmoError, match=r"\[E250\] '.*recipe.json' names a JSON file"):
        PretrainConfig.from_file(path)
    result = runner.invoke(app, ["pretrain", str(path), "a.txt", "--output",
                                 str(tmp_path / "run"), "--max-steps", "3"])
    assert result.exit_code == 1, result.output
    message = flat(result.stderr)
    assert "[E250]" in message and "spacy-elmo init-pretrain-config NEW.cfg" in message
    assert f"spacy-elmo pretrain --config {path} --dry-run > NEW.cfg" in message
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("flag", ["--config", "-c", "--config=p.cfg"])
def test_the_config_flag_of_0_1_is_refused_with_the_positional_form(tmp_path, flag):
    path = tmp_path / "p.cfg"
    path.write_text("[training]\nmax_steps = 3\n")
    args = [flag] if "=" in flag else [flag, str(path)]
    result = runner.invoke(app, ["pretrain", *args, "--dry-run"])
    assert result.exit_code == 1, result.output
    assert (f"[E252] {flag.split('=')[0]} is gone" in flat(result.stderr)
            and "spacy-elmo pretrain CONFIG.cfg [TEXT]..." in flat(result.stderr))


def test_a_run_of_0_1_is_refused_with_the_way_to_continue(tmp_path, monkeypatch):
    """The 1.0 fixture's run with its checkpoint as 0.1 wrote it (a checksum over its
    tensors only): --resume says to continue from an export; the run is left as it was."""
    shutil.copytree(V1_0_PRETRAIN, tmp_path / "pretrain", ignore=shutil.ignore_patterns("model"))
    monkeypatch.chdir(tmp_path / "pretrain")
    as_written_by_0_1(Path("run") / "checkpoint.pt")
    before = {p.name: p.read_bytes() for p in Path("run").iterdir()}
    result = runner.invoke(app, ["pretrain", "--output", "run", "--resume", "--max-steps", "3",
                                 "--threads", "1"])
    assert result.exit_code == 1, result.output
    message = flat(result.stderr)
    assert "[E251]" in message and "a checksum over its tensors only" in message
    assert "--init-weights run/model" in message and "spacy-elmo export run OUT" in message
    after = {p.name: p.read_bytes() for p in Path("run").iterdir() if p.name != ".lock"}
    assert after == before  # the run's files as they were (beside its lock file)


def test_resume_without_a_config_continues_with_the_run_s_record(tmp_path):
    """`--output RUN --resume` reads RUN/config.json, which the trainer wrote (JSON, as
    the run's other records), then the overrides."""
    run = tmp_path / "run"
    run.mkdir()
    recorded = PretrainConfig(train=["a.txt"], output=str(run), lr=0.5, max_steps=4)
    (run / "config.json").write_text(json.dumps(recorded.to_dict()))
    config = resolved("--output", str(run), "--resume", "--max-steps", "9")
    assert config == PretrainConfig(train=["a.txt"], output=str(run), lr=0.5, max_steps=9)
    assert resolved("--output", str(run), "--max-steps", "9").lr == 0.2  # a new run: defaults


def test_resume_in_the_default_run_directory_reads_its_record(tmp_path, monkeypatch):
    """`spacy-elmo pretrain --resume` without --output continues the run in the default
    directory with its recorded settings (it read the defaults instead: no corpus, E113)."""
    monkeypatch.chdir(tmp_path)
    default = PretrainConfig().output
    Path(default).mkdir(parents=True)
    recorded = PretrainConfig(train=["a.txt"], lr=0.05, max_steps=777)
    (Path(default) / "config.json").write_text(json.dumps(recorded.to_dict()))
    assert resolved("--resume") == recorded
    assert resolved("--resume", "--max-steps", "800").max_steps == 800


@pytest.mark.parametrize("args", [["corpus.txt", "my.cfg"], ["corpus.txt", "--dev", "d.txt",
                                                               "b.txt", "MY.CFG"]])
def test_a_config_file_after_the_text_is_refused_not_read_as_text(args):
    """`pretrain corpus.txt my.cfg` trained on the defaults with the config file as text
    (after --dev, as dev text)."""
    with pytest.raises(ElmoError, match=r"\[E253\] '(my|MY)\.(cfg|CFG)' looks like a "
                                        r"pretraining config, but it is not the first"):
        read_command_line(args)
    path, _ = read_command_line(["MY.CFG", "corpus.txt"])  # first: the config, any case
    assert path == Path("MY.CFG")


def test_cfg_with_section_overrides_and_interpolation(tmp_path):
    path = tmp_path / "p.cfg"
    path.write_text('[paths]\ntrain = ["${vars.root}/a.txt"]\n\n[vars]\nroot = "data"\n\n'
                    '[corpus]\nskip_pattern = "^= .* =$"\n\n[model]\npreset = "small"\n\n'
                    "[model.options]\nlstm_dim = 512\n", encoding="utf-8")
    with pytest.raises(ElmoError, match=r"\[E111\].*'vars.root'"):
        PretrainConfig.from_file(path)
    path.write_text(path.read_text().replace("${vars.root}", "${paths.output}").replace(
        '[vars]\nroot = "data"\n', ""))
    config = resolved(str(path), "--paths.output", "elsewhere", "--model.options.n_highway",
                      "1", "--training.max_steps", "12", "--corpus.split_sentences", "false")
    assert config.train == ["elsewhere/a.txt"]  # the override, then interpolation
    assert config.skip_pattern == "^= .* =$"
    assert config.options == {"lstm_dim": 512, "n_highway": 1}
    assert (config.max_steps, config.split_sentences, config.preset) == (12, False, "small")
    # a number for a text setting is its text; one text for a list is that list
    config = resolved(str(path), "--paths.output", "2024", "--paths.dev", "d.txt")
    assert (config.output, config.dev) == ("2024", ["d.txt"])


@pytest.mark.parametrize("args,message", [
    (["--corpus.max_steps", "3"], r"\[E127\] --corpus.max_steps is not a pretraining setting. "
                                  r"Did you mean --training.max_steps \(or --max-steps\)\?"),
    (["--max-step", "3"], r"\[E127\] --max-step is not a pretraining setting. Did you "
                          r"mean --max-steps\?"),
    (["--training.max_stpes", "3"], r"Did you mean --training.max_steps\?"),
    (["--training.max_steps", "0"], r"\[E112\] Pretraining setting max_steps must be a "
                                    r"positive integer, got 0"),
    (["--max-steps", "ten"], r"max_steps must be a positive integer, got 'ten'"),
    (["--max-steps"], r"\[E132\] --max-steps needs a value"),
    (["--model.options.lstm_dims", "3"], r"Unknown key\(s\) \['lstm_dims'\] in 'options'"),
    (["--options", "[1]"], r"\[E118\]"),
])
def test_bad_overrides_are_named(tmp_path, args, message):
    result = runner.invoke(app, ["pretrain", str(tmp_path / "c.txt"), "-o",
                                 str(tmp_path / "run"), *args])
    assert result.exit_code == 1, result.output
    assert re.search(message, flat(result.stderr)), result.stderr
    assert not (tmp_path / "run").exists()


def test_a_cfg_key_in_the_wrong_section_or_unparsable(tmp_path):
    path = tmp_path / "p.cfg"
    path.write_text("[corpus]\nmax_steps = 3\n")
    with pytest.raises(ElmoError, match=r"corpus.max_steps \(it belongs in \[training\]\)"):
        PretrainConfig.from_file(path)
    path.write_text("[corpus\nlang = en\n")
    with pytest.raises(ElmoError, match=r"\[E131\] Could not read the pretraining config"):
        PretrainConfig.from_file(path)
    # a missing config file is named as such, not taken for training text
    result = runner.invoke(app, ["pretrain", str(tmp_path / "absent.cfg"), "--max-steps", "3"])
    assert result.exit_code == 1 and "[E001] No such file" in result.stderr


# Every pretrain command in README.md and project.yml as of this change, with `...` the text
README_COMMANDS = [
    "corpus/train.txt --dev corpus/dev.txt --output runs/tiny --lang en --preset tiny "
    "--vocab-size 20000 --n-negatives 2048 --batch-size 32 --max-steps 2000 --threads 2",
    "--output runs/tiny --resume",
    "zh_text.txt.xz --lang zh --output runs/zh --preset tiny --max-steps 20000 "
    "--n-negatives 1024",
    "zh_text.txt.xz --lang zh --segmenter jieba --vocab-size 30000 --output runs/zh_words "
    "--preset tiny",
    "NEW/PATH/*.txt.xz --dev NEW/dev.txt --output DIR --resume",
    "configs/pretrain_en_first.cfg data/lm_en/enwiki_core.train.*.txt.xz --dev "
    "data/lm_en/enwiki_core.valid.txt.xz --output bilm/run --max-steps 6000 --threads 2 "
    "--snapshot-every 500 --resume",
    "configs/pretrain_en.cfg data/lm_en/*.train.*.txt.xz --dev "
    "data/lm_en/enwiki_core.valid.txt.xz --output bilm/run_v2 --threads 2 --resume",
    "configs/pretrain_en_long.cfg data/lm_en/*.train.*.txt.xz --dev "
    "data/lm_en/enwiki_core.valid.txt.xz --output bilm/en_long --resume",
    "configs/pretrain_zh.cfg --output bilm/zh_wiki_run --threads 2 --resume",
    "configs/pretrain_zh_news.cfg --output bilm/zh_news_run --threads 2 --resume",
    "configs/pretrain_zh_jieba.cfg --output bilm/zh_jieba_run --max-steps 7000 --threads 2 "
    "--resume",
]


@pytest.mark.parametrize("command", README_COMMANDS)
def test_documented_commands_keep_their_meaning(command, monkeypatch):
    monkeypatch.chdir(ROOT)
    args = command.split()
    config = resolved(*args)
    given = set()
    for i, flag in enumerate(args):  # each flag set its setting
        if flag in by_flag(PretrainConfig):
            item = by_flag(PretrainConfig)[flag]
            value = getattr(config, item.name)
            assert str(value[-1] if isinstance(value, list) else value) == args[i + 1], flag
            given.add(item.name)
    first = list(itertools.takewhile(lambda arg: not arg.startswith("-"), args))
    path = first.pop(0) if first and first[0].endswith(".cfg") else None
    if first:  # TEXT
        assert config.train == first
        given.add("train")
    base = PretrainConfig.from_file(path) if path else PretrainConfig()
    assert {k: v for k, v in config.to_dict().items() if k not in given} == {
        k: v for k, v in base.to_dict().items() if k not in given}  # the rest: the config's


def test_every_flag_the_docs_use_is_a_shortcut():
    """All `--flags` of pretrain commands in README.md and project.yml: shortcuts of a
    setting, or the command's own options."""
    own = {"--resume", "--overwrite", "--gpu-id", "--dry-run"}
    text = (ROOT / "README.md").read_text() + (ROOT / "project.yml").read_text()
    commands = re.findall(r"(?:spacy-elmo|spacy_elmo) pretrain((?:[^\n`]|\\\n)*)", text)
    flags = {f for command in commands for f in re.findall(r"(?<![\w-])--[a-z][a-z-]*",
                                                           command)}
    assert "--max-steps" in flags and "--threads" in flags and "--resume" in flags
    assert flags - own - set(by_flag(PretrainConfig)) == set()


def test_list_and_bool_shortcuts(tmp_path):
    config = resolved("a.txt", "b.txt", "--dev", "d1.txt", "--dev=d2.txt", "--split-sentences",
                      "false", "--sum-over-steps", "--seed", "-3", "--skip-pattern", "^#",
                      "--max-minutes", "null", "--options", '{"lstm_dim": 32}')
    assert config.train == ["a.txt", "b.txt"] and config.dev == ["d1.txt", "d2.txt"]
    assert (config.split_sentences, config.sum_over_steps, config.seed) == (False, True, -3)
    assert (config.skip_pattern, config.max_minutes, config.options) == ("^#", None,
                                                                          {"lstm_dim": 32})
    # a true/false flag without a value, before the training text
    assert resolved("--split-sentences", "a.txt").train == ["a.txt"]


def test_gpu_id_sets_the_device_and_device_is_a_setting_only():
    assert resolved("a.txt", "--gpu-id", "-1").device == "cpu"
    assert resolved("a.txt", "--gpu-id", "1").device == "cuda:1"
    assert resolved("a.txt").device == "auto"
    assert resolved("a.txt", "--system.device", "cpu", "--gpu-id", "0").device == "cuda:0"
    result = runner.invoke(app, ["pretrain", "a.txt", "--device", "cpu", "--dry-run"])
    assert result.exit_code == 1, result.output  # the hidden flag of 0.1
    assert ("[E127] --device is not a pretraining setting. Did you mean --system.device?"
            in flat(result.stderr))
    result = runner.invoke(app, ["pretrain", "--help"], env={"COLUMNS": "200"})
    assert "--config" not in result.output and "--device " not in result.output


@pytest.mark.parametrize("name", ["pretrain_en.cfg", "pretrain_zh.cfg"])
def test_printed_settings_read_back_as_they_were(name, tmp_path, monkeypatch):
    """`pretrain CONFIG --dry-run > NEW.cfg` (as E250 says to write one) gives a file that
    reads back to the same settings: a lone $ (skip_pattern "^= .* =$") stays one $ both
    ways (thinc's Config.to_str writes it $$, which this reader keeps as $$)."""
    monkeypatch.chdir(ROOT)
    result = runner.invoke(app, ["pretrain", f"configs/{name}", "--paths.output", "runs/a$b",
                                 "--dry-run"])
    assert result.exit_code == 0, result.output
    (tmp_path / "new.cfg").write_text(result.stdout, encoding="utf-8")
    config = PretrainConfig.from_file(tmp_path / "new.cfg")
    assert config == PretrainConfig.from_file(f"configs/{name}", output="runs/a$b")
    assert config.output == "runs/a$b"


def test_init_pretrain_config_writes_the_defaults(tmp_path):
    out = tmp_path / "p.cfg"
    result = runner.invoke(app, ["init-pretrain-config", str(out), "--preset", "small",
                                 "--lang", "en"])
    assert result.exit_code == 0, result.output
    assert PretrainConfig.from_file(out) == default_settings(preset_name="small", lang="en")
    assert PretrainConfig.from_file(out).preset == "small"
    result = runner.invoke(app, ["init-pretrain-config", str(out)])
    assert result.exit_code == 1 and "[E026]" in result.stderr  # not replaced
    result = runner.invoke(app, ["init-pretrain-config", "-"])
    assert result.exit_code == 0 and result.stdout == default_settings().to_cfg()
    assert "preset = null" in result.stdout  # tiny, or the shape of init_weights
    result = runner.invoke(app, ["init-pretrain-config", "-", "--preset", "huge"])
    assert result.exit_code == 1 and "preset must be one of" in flat(result.stderr)
