"""Where each row stops rising (`spacy_elmo_lab.dev_curves`): the dev curve read from the
table spaCy prints while training, the mean over seeds, the best step; and the table
runner's own directories, so that a study at another budget keeps its cells apart."""

import json

import pytest
from spacy_elmo_lab import dev_curves, run_table
from typer.testing import CliRunner

from spacy_elmo.errors import ElmoError

NER_LOG = """\x1b[38;5;4mi Saving to output directory: training/ner_elmo_s0\x1b[0m
E    #       LOSS ELMO  LOSS NER  ENTS_F  ENTS_P  ENTS_R  SCORE
---  ------  ---------  --------  ------  ------  ------  ------
  0       0       0.00     86.06    0.00    0.00    0.00    0.00
  0     500       0.00  10231.43   61.36   61.22   61.49    0.61
[W002] 1 token(s) are longer than this biLM's budget, e.g. '------------'.
  0    1000       0.00   5066.03   {f1000}   81.96   78.42    0.80
  1    1500       0.00   4163.05   {f1500}   82.42   82.70    0.83
\x1b[38;5;2mSaved pipeline to output directory\x1b[0m
"""
UD_LOG = """E    #       LOSS ELMO  LOSS TAGGER  LOSS MORPH...  DEP_LAS  SENTS_F  SCORE
---  ------  ---------  -----------  -------------  -------  -------  ------
  0       0       0.00       966.86         983.93     5.43   100.00    0.29
  1     250       0.00    124897.30      186057.77    70.96    99.78    0.79
"""


def _cell(training, run, log, done=True):
    (training / run).mkdir(parents=True)
    (training / run / "train.log").write_text(log, encoding="utf-8")
    if done:
        (training / run / "cell.json").write_text("{}", encoding="utf-8")


def test_a_log_gives_the_main_metric_at_each_evaluation(tmp_path):
    _cell(tmp_path, "ner_elmo_s0", NER_LOG.format(f1000=80.15, f1500=82.56))
    assert dev_curves.read_curve(tmp_path / "ner_elmo_s0" / "train.log") == {
        0: 0.0, 500: 61.36, 1000: 80.15, 1500: 82.56}
    _cell(tmp_path, "ud_elmo_s0", UD_LOG)  # LAS, not the sentence F the header also has
    assert dev_curves.read_curve(tmp_path / "ud_elmo_s0" / "train.log") == {0: 5.43,
                                                                           250: 70.96}


def test_seeds_are_averaged_and_a_row_that_peaks_early_is_not_rising(tmp_path):
    _cell(tmp_path, "ner_elmo_s0", NER_LOG.format(f1000=80.0, f1500=82.0))
    _cell(tmp_path, "ner_elmo_s1", NER_LOG.format(f1000=84.0, f1500=83.0))
    _cell(tmp_path, "ner_cnn_s0", NER_LOG.format(f1000=85.0, f1500=80.0))
    _cell(tmp_path, "ner_cnn_s1", NER_LOG.format(f1000=99.0, f1500=99.0), done=False)
    rows = dev_curves.row_curves(tmp_path, [])
    assert sorted(rows) == ["ner_cnn", "ner_elmo"]
    assert len(rows["ner_cnn"]) == 1  # the unfinished seed's curve would end early
    elmo = dev_curves.summarize(rows["ner_elmo"])
    assert elmo.mean[1000] == 82.0 and elmo.mean[1500] == 82.5
    assert elmo.best == [1500, 1000] and elmo.last == [1500, 1500] and elmo.rising
    cnn = dev_curves.summarize(rows["ner_cnn"])
    assert (cnn.best, cnn.last, cnn.rising) == ([1000], [1500], False)
    lines = dev_curves.table(rows)
    assert ("| ner_elmo | 2 | 500: 61.4, 1000: 82.0, 1500: 82.5 | 1500 / 1000 | 1500 / 1500 "
            "| yes |") in lines
    assert dev_curves.row_curves(tmp_path, ["ner_cnn"]).keys() == {"ner_cnn"}


def test_a_finished_cell_without_evaluations_or_no_cells_is_a_clear_error(tmp_path):
    _cell(tmp_path, "ner_elmo_s0", "Traceback (most recent call last):\n")
    with pytest.raises(ElmoError, match=r"\[E290\].*ner_elmo_s0"):
        dev_curves.row_curves(tmp_path, [])
    result = CliRunner().invoke(_app(dev_curves.main), [str(tmp_path / "none")])
    assert result.exit_code == 1 and "[E291]" in result.output
    result = CliRunner().invoke(_app(dev_curves.main), [str(tmp_path), "sst5_"])
    assert result.exit_code == 1 and "whose run starts with sst5_" in result.output


def _app(main):
    """`main` as the command line runs it (`python -m spacy_elmo_lab.X`)."""
    import typer

    app = typer.Typer()
    app.command()(main)
    return app


def test_the_table_runner_trains_and_scores_into_the_directories_given(tmp_path,
                                                                       monkeypatch):
    """--training and --metrics: a cell's --output and the archive's restored records go
    there, not to training/ and metrics/."""
    monkeypatch.chdir(tmp_path)
    archive = tmp_path / "archive"
    archive.mkdir()
    budget = ["--training.max_steps", "9000", "--training.eval_frequency", "500",
              "--gpu-id", "-1"]
    cell = run_table.make_cells("en", ["ner"], ["cnn"], [0], {"weights": "null"}, budget,
                                tmp_path / "study")[0]
    assert cell.command[cell.command.index("--output") + 1] == str(tmp_path / "study" /
                                                                   "ner_cnn_s0")
    record = {"command": run_table.recorded(cell.command), "dev": 1.0, "test": 2.0,
              "metrics": {"dev": {"ents_f": 0.01}, "test": {"ents_f": 0.02}}}
    (archive / "ner_cnn_s0.json").write_text(json.dumps(record), encoding="utf-8")
    result = CliRunner().invoke(_app(run_table.main), [
        "en", "--tasks", "ner", "--rows", "cnn", "--seeds", "0", "--max-steps", "9000",
        "--training", str(tmp_path / "study"), "--metrics", str(tmp_path / "scores"),
        "--archive", str(archive), "--dry-run"])
    assert result.exit_code == 0, result.output
    assert "1 cells, 1 finished, 0 to run" in result.output
    assert (tmp_path / "study" / "ner_cnn_s0" / "cell.json").exists()
    assert (tmp_path / "scores" / "ner_cnn_s0.test.json").exists()
    assert not (tmp_path / "training").exists() and not (tmp_path / "metrics").exists()
