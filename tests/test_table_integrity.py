"""Results that cannot be trusted are never reused: table cells and curve points of other
settings or of interrupted trainings are trained again, and incomplete tables say so."""

import json
import shutil
import sys
from pathlib import Path

import pytest
import typer
from spacy_elmo_lab import (
    cell_inputs,
    curve,
    evaluate,
    migrate_records,
    results,
    run_table,
    table,
)

ROOT = Path(__file__).resolve().parents[1]


def _cell(run_table, weights="null", steps="3000", gpu="-1"):
    budget = ["--training.max_steps", steps, "--gpu-id", gpu]
    return run_table.make_cells("en", ["ner"], ["elmo"], [0], {"weights": weights}, budget)[0]


def test_a_cell_recorded_with_other_settings_is_not_finished(tmp_path):
    """A cell trained with the bundled biLM counted as finished for --weights
    bilm/pretrained_v2: the table silently reported the old biLM's scores."""
    cell = _cell(run_table)
    (tmp_path / cell.run).mkdir()
    (tmp_path / cell.run / "cell.json").write_text(json.dumps(
        {"command": run_table.recorded(cell.command), "test": 80.0}))
    assert run_table.finished(cell, tmp_path)
    assert run_table.finished(_cell(run_table, gpu="0"), tmp_path)  # the device aside
    assert not run_table.finished(_cell(run_table, weights="bilm/pretrained_v2"), tmp_path)
    assert not run_table.finished(_cell(run_table, steps="600"), tmp_path)


def _weights(directory, seed):
    from spacy_elmo.bilm import save_bilm

    from .conftest import make_random_bilm

    save_bilm(make_random_bilm(seed=seed), directory)
    return str(directory)


def test_a_cell_is_finished_for_the_weights_it_was_trained_from(tmp_path):
    """A record names the biLM by its path, and the bundled biLM's path stayed the same
    across releases: the ELMo cells of an earlier bundled biLM counted as finished for
    today's. The record holds the digest of what it trained from, and a cell is finished
    for the same content under any path, never for other content under the same path."""
    training = tmp_path / "training"
    first = _weights(tmp_path / "a", seed=1)
    cell = _cell(run_table, weights=first)
    (training / cell.run).mkdir(parents=True)
    (training / cell.run / "cell.json").write_text(json.dumps(
        {"command": run_table.recorded(cell.command), "test": 80.0,
         "inputs": cell_inputs.input_digests(cell.command, "en")}))
    assert run_table.finished(cell, training)
    copy = tmp_path / "copy"
    shutil.copytree(first, copy)
    assert run_table.finished(_cell(run_table, weights=str(copy)), training)
    cell_inputs.path_digest.cache_clear()
    _weights(tmp_path / "a", seed=2)  # other weights where the first were
    assert not run_table.finished(cell, training)
    # a record from before the digests: its command decides, as before
    (training / cell.run / "cell.json").write_text(json.dumps(
        {"command": run_table.recorded(cell.command), "test": 80.0}))
    assert run_table.finished(cell, training)


def test_the_bundled_biLM_of_null_weights_is_the_task_language_s():
    command = ["--paths.elmo_weights", "null", "--paths.vectors", "nowhere"]
    assert set(cell_inputs.command_paths(command)) == {"elmo_weights", "vectors"}
    en, zh = (cell_inputs.input_digests(command, lang) for lang in ("en", "zh"))
    assert set(en) == {"elmo_weights"} and en != zh  # a missing input is not recorded


def test_a_row_keeps_its_meaning_when_a_shipped_default_moves():
    """1.1 moved textcat_elmo.cfg to a biLSTM with attention pooling: the table's `elmo`
    row (CNN, max + mean) says so in its command, and the records of its cells from before
    are migrated to the same command (idempotently)."""
    budget = ["--training.max_steps", "3000"]
    cells = {c.row: c for c in run_table.make_cells(
        "en", ["sst5"], ["elmo", "elmo_bilstm", "elmo_bilstm_attn"], [0], {"weights": "null"},
        budget)}
    words = {row: run_table.recorded(c.command).split() for row, c in cells.items()}
    assert words["elmo"][-4:] == ["--components.textcat.model.tok2vec.encode.kind", "cnn",
                                  "--components.textcat.model.pool", "reduce"]
    task = run_table.TABLES["en"]["sst5"]
    for row, row_words in words.items():
        mine = " ".join(row_words)
        # what the row's command was before 1.1: without the settings it now pins
        drop = {"elmo": 4, "elmo_bilstm": 0, "elmo_bilstm_attn": 0}[row]
        before = " ".join(row_words[:len(row_words) - drop]) if drop else mine
        if row == "elmo_bilstm":
            before = mine.replace(" --components.textcat.model.pool reduce", "")
        now = migrate_records.pinned(before, task)
        assert table.settings(now) == table.settings(mine), row
        assert migrate_records.pinned(now, task) == now
    assert "attention" in " ".join(words["elmo_bilstm_attn"])  # its own overrides win


def test_the_ner_rows_keep_their_encoder_when_the_ner_default_moves():
    """1.1 moved ner_elmo.cfg to a biLSTM with ELMo again at its output: each NER row, in
    English and Chinese, names the encoder it was defined with, and a record from before
    (its command without them) is migrated to the same settings."""
    budget = ["--training.max_steps", "3000"]
    kind, at_output = (f"--components.ner.model.tok2vec.{k}" for k in ("encode.kind",
                                                                        "elmo_at_output"))
    expected = {"elmo": ("cnn", "false"), "elmo_ft": ("cnn", "false"),
                "elmo_bilstm": ("bilstm", "false"), "elmo_bilstm_out": ("bilstm", "true")}
    for table_name, task_name in [("en", "ner"), ("zh", "msra")]:
        task = run_table.TABLES[table_name][task_name]
        cells = run_table.make_cells(table_name, [task_name], list(expected), [0],
                                     {"weights": "null"}, budget)
        assert cells, task_name
        for cell in cells:
            words = run_table.recorded(cell.command).split()
            options = dict(zip(words[5::2], words[6::2], strict=False))
            assert (options[kind], options[at_output]) == expected[cell.row], cell.run
            if cell.row in ("elmo", "elmo_ft"):  # their commands before 1.1 gave neither
                before = " ".join(w for i, w in enumerate(words) if not (
                    w in (kind, at_output) or (i and words[i - 1] in (kind, at_output))))
                assert table.settings(migrate_records.pinned(before, task)) == \
                    table.settings(" ".join(words)), cell.run


def test_every_cell_needs_a_test_split_and_rows_belong_to_the_table(tmp_path, monkeypatch):
    assert Path("corpus/conll/test.spacy") in _cell(run_table).needs
    monkeypatch.chdir(tmp_path)
    with pytest.raises(typer.BadParameter, match=r"unknown tasks or rows \['elmo_news'\] for "
                                                 r"the en table"):
        run_table.main("en", tasks="sst5", rows="elmo_news", dry_run=True, summary=None,
                       seeds="0", weights="null", news_weights="N", jieba_weights="J",
                       max_steps=2, eval_frequency=1, gpu_id=-1, jobs=1, archive=None)


def test_a_failing_cell_run_alone_is_reported_not_a_traceback(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    bad = run_table.Cell("trec", "broken", 0, Path("corpus/trec"),
                         [sys.executable, "-c", "raise SystemExit(3)"], [])
    never = run_table.Cell("trec", "never", 0, Path("corpus/trec"),
                           [sys.executable, "-c", "open('ran', 'w')"], [])
    assert run_table.run_cells([bad, never], Path("training"), Path("metrics"), -1, 1) == [
        "trec_broken_s0"]
    assert "trec_broken_s0 failed" in capsys.readouterr().err
    assert not (tmp_path / "ran").exists()  # no new cell after a failure


def test_unfinished_cells_are_neither_evaluated_nor_mixed_in(tmp_path, monkeypatch, capsys):
    training = tmp_path / "training"
    for run, files in {"ner_elmo_s1": ["model-best", "model-last", "cell.running"],  # stopped
                       "ner_cnn_s0": ["model-best", "model-last"],  # by hand
                       "ner_cnn_s1": ["model-best", "model-last", "cell.json"]}.items():
        (training / run).mkdir(parents=True)
        for name in files:
            (training / run / name).mkdir() if name.startswith("model") else \
                (training / run / name).write_text("{}")
    evaluated = []
    monkeypatch.setattr(evaluate, "evaluate_run",
                        lambda run, *args: evaluated.append(run.name) or {"test": 1.0})
    evaluate.main(training, tmp_path / "corpus", tmp_path / "metrics")
    assert evaluated == ["ner_cnn_s0", "ner_cnn_s1"]
    assert "ner_elmo_s1: skipped, a table cell whose training did not finish" in \
        capsys.readouterr().err
    assert results.layer_mixes(training) == []  # the unfinished ELMo run is not loaded


def test_a_cell_trained_again_loses_its_old_record_first(tmp_path, monkeypatch):
    """A cell retrained for other settings kept the old biLM's cell.json and metrics until
    it finished: an interruption left them beside a half-trained model."""
    monkeypatch.chdir(tmp_path)
    cell = _cell(run_table)
    run_dir, metrics = Path("training") / cell.run, Path("metrics")
    run_dir.mkdir(parents=True)
    metrics.mkdir()
    (run_dir / "cell.json").write_text('{"command": "python old", "test": 80.0}')
    (metrics / f"{cell.run}.test.json").write_text('{"ents_f": 0.8}')
    seen = {}

    def interrupted(command, **kwargs):
        seen["record"] = (run_dir / "cell.json").exists()
        seen["metrics"] = (metrics / f"{cell.run}.test.json").exists()
        seen["running"] = (run_dir / "cell.running").read_text()
        raise KeyboardInterrupt

    monkeypatch.setattr(run_table.subprocess, "run", interrupted)
    with pytest.raises(KeyboardInterrupt):
        run_table.run_cell(cell, Path("training"), metrics, -1)
    assert seen == {"record": False, "metrics": False,
                    "running": run_table.recorded(cell.command) + "\n"}
    assert (run_dir / "cell.running").exists() and not run_table.finished(cell, Path("training"))


def test_curve_retrains_what_is_not_done_and_checks_its_arguments_first(tmp_path,
                                                                         monkeypatch):
    calls = []

    def train(command, check):
        calls.append(command)
        (Path(command[command.index("--output") + 1]) / "model-best").mkdir(parents=True,
                                                                            exist_ok=True)

    def evaluate(model, data, output, use_gpu, silent):
        Path(output).write_text(json.dumps({"ents_f": 0.5}))

    monkeypatch.setattr(curve.subprocess, "run", train)
    monkeypatch.setattr(curve, "evaluate", evaluate)
    bilm = tmp_path / "a" / "mine"
    bilm.mkdir(parents=True)
    args = dict(config=Path("c.cfg"), corpus=tmp_path, output=tmp_path / "out", wic=None,
                every=0, gpu_id=-1, eval_frequency=1)
    with pytest.raises(typer.BadParameter, match="--baseline .* does not exist"):
        curve.main(bilms=[f"{bilm}=30"], baseline=tmp_path / "none.json", max_steps=5, **args)
    other = tmp_path / "b" / "mine"
    other.mkdir(parents=True)
    with pytest.raises(typer.BadParameter, match=r"share the run name\(s\) \['mine'\]"):
        curve.main(bilms=[f"{bilm}=30", f"{other}=20"], baseline=None, max_steps=5, **args)
    snapshot = tmp_path / "snapshots" / "step_0002500"
    snapshot.mkdir(parents=True)
    (snapshot / "dev.json").write_text(json.dumps({"step": 2500, "dev_ppl": 99.0}))
    with pytest.raises(typer.BadParameter, match="no biLM to train"):
        curve.main(bilms=[str(tmp_path / "snapshots")], baseline=None, max_steps=5,
                   **{**args, "every": 5000})
    assert calls == []  # nothing trained before the arguments were checked
    # a model-best without done.json (a run stopped halfway) is trained again
    (tmp_path / "out" / "mine" / "model-best").mkdir(parents=True)
    curve.main(bilms=[f"{bilm}=30"], baseline=None, max_steps=5, **args)
    assert len(calls) == 1
    curve.main(bilms=[f"{bilm}=30"], baseline=None, max_steps=5, **args)
    assert len(calls) == 1  # done: reused
    curve.main(bilms=[f"{bilm}=30"], baseline=None, max_steps=9, **args)
    assert len(calls) == 2  # another budget: trained again
    assert "| mine | - | 30.0 | 50.0 | - |" in (tmp_path / "out" / "curve.md").read_text()



def test_rows_after_rival_biLMs_take_the_one_with_the_better_dev_score(tmp_path, monkeypatch):
    """THUCNews: `elmo` (Wikipedia biLM) and `elmo_news` compete on mean dev score; the
    concat rows run after them, in the same invocation, over the winner."""
    monkeypatch.chdir(tmp_path)
    for path in ["corpus/thucnews/train.spacy", "corpus/thucnews/dev.spacy",
                 "corpus/thucnews/test.spacy"] + [
                 f"configs/textcat_{c}.cfg" for c in ("elmo", "elmo_concat")]:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text("")
    for path in ("bilm/zh_wiki", "bilm/zh_news"):
        Path(path).mkdir(parents=True)
    dev = {"thucnews_elmo_s0": 80.0, "thucnews_elmo_s1": 84.0,  # mean 82
           "thucnews_elmo_news_s0": 83.0, "thucnews_elmo_news_s1": 82.0}  # mean 82.5
    trained = []
    monkeypatch.setattr(run_table.subprocess, "run",
                        lambda command, **kw: trained.append(command))
    monkeypatch.setattr(run_table, "evaluate_run", lambda run_dir, *a, **kw: {
        "dev": dev.get(run_dir.name, 0.0), "test": 1.0})
    rows = "elmo,elmo_news,elmo_concat"
    run_table.main("zh", tasks="thucnews", rows=rows, seeds="0,1", weights="bilm/zh_wiki",
                   news_weights="bilm/zh_news", jieba_weights="x", max_steps=10,
                   eval_frequency=5, gpu_id=-1, jobs=1, dry_run=False,
                   summary=Path("results/t.json"), archive=None)
    runs = [c[c.index("--output") + 1].split("/")[-1] for c in trained]
    assert runs[-2:] == ["thucnews_elmo_concat_s0", "thucnews_elmo_concat_s1"]
    for command in trained[-2:]:
        assert command[command.index("--paths.elmo_weights") + 1] == "bilm/zh_news"
    record = json.loads(Path("training/thucnews_elmo_concat_s0/cell.json").read_text())
    assert record["bilm_chosen_by_dev"] == {"elmo": 82.0, "elmo_news": 82.5}
    assert "thucnews_elmo_concat_s1" in json.loads(Path("results/t.json").read_text())
    # a rerun finds every cell finished, the concat rows' biLM chosen the same; a new
    # seed trains its three cells only
    trained.clear()
    run_table.main("zh", tasks="thucnews", rows=rows, seeds="0,1", weights="bilm/zh_wiki",
                   news_weights="bilm/zh_news", jieba_weights="x", max_steps=10,
                   eval_frequency=5, gpu_id=-1, jobs=1, dry_run=False, summary=None,
                   archive=None)
    assert trained == []
    dev.update({"thucnews_elmo_s2": 82.0, "thucnews_elmo_news_s2": 82.5})
    run_table.main("zh", tasks="thucnews", rows=rows, seeds="0,1,2", weights="bilm/zh_wiki",
                   news_weights="bilm/zh_news", jieba_weights="x", max_steps=10,
                   eval_frequency=5, gpu_id=-1, jobs=1, dry_run=False, summary=None,
                   archive=None)
    assert [c[c.index("--output") + 1].split("/")[-1] for c in trained] == [
        "thucnews_elmo_s2", "thucnews_elmo_news_s2", "thucnews_elmo_concat_s2"]
    trained.clear()
    run_table.main("zh", tasks="thucnews", rows=rows, seeds="0,1", weights="bilm/zh_wiki",
                   news_weights="bilm/zh_news", jieba_weights="x", max_steps=10,
                   eval_frequency=5, gpu_id=-1, jobs=1, dry_run=False, summary=None,
                   archive=None)
    assert trained == []


def _thucnews_inputs(tmp_path, weights=("bilm/zh_wiki", "bilm/zh_news")):
    for path in ["corpus/thucnews/train.spacy", "corpus/thucnews/dev.spacy",
                 "corpus/thucnews/test.spacy"] + [
                 f"configs/textcat_{c}.cfg" for c in ("elmo", "elmo_concat")]:
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text("")
    for path in weights:
        (tmp_path / path).mkdir(parents=True)


def _zh_table(run_table, rows, summary=None, seeds="0"):
    run_table.main("zh", tasks="thucnews", rows=rows, seeds=seeds, weights="bilm/zh_wiki",
                   news_weights="bilm/zh_news", jieba_weights="x", max_steps=10,
                   eval_frequency=5, gpu_id=-1, jobs=1, dry_run=False, summary=summary,
                   archive=None)


def test_rows_waiting_for_rivals_that_cannot_run_are_listed_not_run(tmp_path, monkeypatch,
                                                                    capsys):
    monkeypatch.chdir(tmp_path)
    _thucnews_inputs(tmp_path, weights=("bilm/zh_wiki",))  # no news-adapted biLM
    trained = []
    monkeypatch.setattr(run_table.subprocess, "run", lambda c, **kw: trained.append(c))
    monkeypatch.setattr(run_table, "evaluate_run", lambda *a, **kw: {"dev": 1.0, "test": 1.0})
    with pytest.raises(typer.BadParameter, match=r"the elmo_concat row of thucnews takes "
                                                 r"the biLM .* add them to --rows \(e.g. "
                                                 r"--rows elmo,elmo_news,elmo_concat\)"):
        _zh_table(run_table, "elmo_concat")
    assert trained == []
    with pytest.raises(typer.Exit):
        _zh_table(run_table, "elmo,elmo_news,elmo_concat", summary=Path("results/t.json"))
    out = capsys.readouterr()
    runs = [c[c.index("--output") + 1].split("/")[-1] for c in trained]
    assert runs == ["thucnews_elmo_s0"]  # the news row lacks its biLM, so the concat waits
    assert "thucnews_elmo_concat_s0: " in out.out and "(after its rival ELMo rows" in out.out
    assert "--paths.elmo_weights <chosen-on-dev>" in out.out
    assert "waiting for cells that could not run" in out.err


def test_archived_cells_match_their_composed_cells(tmp_path):
    """Each record in benchmarks/results/cells names a config that exists and counts as
    finished for the cell the composed configs make with its settings (so a rerun restores
    it, not trains it again), and a record of one row never counts for another."""
    from spacy_elmo_lab.table import TABLES, make_cells

    archived = sorted((ROOT / "benchmarks" / "results" / "cells").glob("*.json"))
    if not archived:
        pytest.skip("no archived cells")
    for path in archived:
        recorded = json.loads(path.read_text())["command"]
        words = recorded.split()
        options = dict(zip(words[5::2], words[6::2], strict=True))
        task, rest = path.stem.split("_", 1)
        row, seed = rest.rsplit("_s", 1)
        table = next(name for name, tasks in TABLES.items() if task in tasks)
        weights = options.get("--paths.elmo_weights", "null")
        values = {"weights": weights, "news_weights": weights, "jieba_weights": weights,
                  "w2v": options.get("--paths.vectors", "null")}
        budget = ["--training.max_steps", options["--training.max_steps"],
                  "--training.eval_frequency", options["--training.eval_frequency"],
                  "--gpu-id", "0"]
        for other in {row, "cnn" if row != "cnn" else "elmo"}:
            cell = make_cells(table, [task], [other], [int(seed)], values, budget)[0]
            done = tmp_path / cell.run / "cell.json"
            done.parent.mkdir(parents=True, exist_ok=True)
            done.write_text(json.dumps({"command": recorded}))
            assert run_table.finished(cell, tmp_path) == (other == row), (path.name, other)
            done.unlink()
        assert (ROOT / words[4]).is_file(), (path.name, words[4])


def test_follow_gives_the_concat_rows_one_rivals_biLM_without_the_other(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _thucnews_inputs(tmp_path, weights=("bilm/zh_wiki",))  # no news-adapted biLM
    trained = []
    monkeypatch.setattr(run_table.subprocess, "run", lambda c, **kw: trained.append(c))
    monkeypatch.setattr(run_table, "evaluate_run", lambda *a, **kw: {"dev": 1.0, "test": 1.0})
    run_table.main("zh", tasks="thucnews", rows="elmo,elmo_concat", seeds="0",
                   weights="bilm/zh_wiki", news_weights="bilm/zh_news", jieba_weights="x",
                   max_steps=10, eval_frequency=5, gpu_id=-1, jobs=1, dry_run=False,
                   summary=Path("results/t.json"), archive=None, follow="elmo")
    runs = [c[c.index("--output") + 1].split("/")[-1] for c in trained]
    assert runs == ["thucnews_elmo_s0", "thucnews_elmo_concat_s0"]
    assert trained[1][trained[1].index("--paths.elmo_weights") + 1] == "bilm/zh_wiki"
    record = json.loads(Path("training/thucnews_elmo_concat_s0/cell.json").read_text())
    assert "bilm_chosen_by_dev" not in record
    with pytest.raises(typer.BadParameter, match=r"--follow takes a row that competes on dev "
                                                 r"in the zh table \(elmo, elmo_news\), not "
                                                 r"'cnn'"):
        run_table.main("zh", tasks="thucnews", rows="elmo_concat", seeds="0",
                       weights="bilm/zh_wiki", news_weights="bilm/zh_news", jieba_weights="x",
                       max_steps=10, eval_frequency=5, gpu_id=-1, jobs=1, dry_run=False,
                       summary=None, archive=None, follow="cnn")


def test_rows_a_task_does_not_have_make_no_cells_for_it():
    """`--tasks ner,sst5 --rows elmo_bilstm_attn` made a NER cell whose override (a text
    classifier's pooling) failed after the cells before it had run: a row is a cell only
    of the tasks that have it."""
    cells = run_table.make_cells("en", ["ner", "sst5"], ["elmo_bilstm", "elmo_bilstm_attn"],
                                 [0], {"weights": "null"}, [])
    assert sorted((c.task, c.row) for c in cells) == [
        ("ner", "elmo_bilstm"), ("sst5", "elmo_bilstm"), ("sst5", "elmo_bilstm_attn")]
