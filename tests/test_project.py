"""The spaCy project and its lab commands: commands point at real files and modules;
converters are right."""

import re
import shutil
import sys
from pathlib import Path

import pytest
import spacy
import srsly
import typer
from spacy.tokens import DocBin
from spacy_elmo_lab import convert, results, run_table
from spacy_elmo_lab.table import CHOSEN_LATER
from thinc.api import Config

ROOT = Path(__file__).resolve().parents[1]


def _project():
    """project.yml with its ${vars.*} substituted (as `spacy project run` does)."""
    project = srsly.read_yaml(ROOT / "project.yml")
    variables = project["vars"]

    def substitute(text):
        for _ in range(5):  # vars may name other vars
            text = re.sub(r"\$\{vars\.(\w+)\}", lambda m: str(variables[m[1]]), text)
        assert "${" not in text, text
        return text

    for command in project["commands"]:
        for key in ("script", "deps", "outputs"):
            command[key] = [substitute(line) for line in command.get(key, [])]
    return project


def test_project_commands_reference_existing_files():
    project = _project()
    names = {c["name"] for c in project["commands"]}
    for workflow in project["workflows"].values():
        assert set(workflow) <= names
    for command in project["commands"]:
        for line in command["script"]:
            for ref in re.findall(r"(?:configs|lab|demo/data)/[\w./-]+", line):
                assert (ROOT / ref).exists(), (command["name"], ref)
            for module in re.findall(r"python -m spacy_elmo_lab\.(\w+)", line):
                assert (ROOT / "lab" / "spacy_elmo_lab" / f"{module}.py").exists(), line
            assert "scripts/" not in line, line


def test_project_commands_have_full_help_and_rerun_their_guarded_commands():
    """`spacy project document` makes the docs' project section from the help texts; a
    command rerun by `spacy project run` replaces its own outputs (--overwrite: the commands
    refuse an existing output without it); `all` promises no command whose inputs are gone
    (`curve` needs a long run's snapshots, `curve-bundled` none)."""
    project = _project()
    for command in project["commands"]:
        assert len(command.get("help", "")) >= 60, command["name"]
        for line in command["script"]:
            if re.match(r"python -m spacy_elmo_lab\.(convert|holdout|raw_text|word2vec|wic"
                        r"|probe_wsd|probe_pos) ", line):
                assert line.endswith(" --overwrite"), line
    assert "curve" not in project["workflows"]["all"]
    assert "curve-bundled" in project["workflows"]["all"]


def test_project_deps_are_files_data_or_outputs_of_other_commands():
    project = _project()
    outputs = {out for c in project["commands"] for out in c["outputs"]}
    data_dir = project["vars"]["data_dir"]
    for command in project["commands"]:
        for dep in command["deps"]:
            made = any(dep == out or dep.startswith(out + "/") for out in outputs)
            assert made or (ROOT / dep).exists() or dep.startswith(data_dir + "/") or \
                dep in project["directories"], (command["name"], dep)


@pytest.mark.parametrize("tags,expected", [
    (["B-PER", "I-PER", "O", "B-LOC"], ["B-PER", "L-PER", "O", "U-LOC"]),
    (["S-ORG", "O", "B-NAME", "M-NAME", "E-NAME"], ["U-ORG", "O", "B-NAME", "I-NAME", "L-NAME"]),
    (["I-ORG", "I-ORG", "O"], ["B-ORG", "L-ORG", "O"]),  # IOB1 / a slip: inside without begin
    (["B-ORG", "O", "M-ORG"], ["U-ORG", "O", "U-ORG"]),
])
def test_tag_schemes_to_biluo(tags, expected):
    assert convert._to_biluo(tags) == expected


def test_convert_ner_and_textcat(tmp_path):
    conll = tmp_path / "ner.txt"
    conll.write_text("-DOCSTART- -X- -X- O\n\nEU NNP B-NP B-ORG\nrejects VBZ B-VP O\n"
                     "German JJ B-NP B-MISC\n\nPeter NNP B-NP B-PER\nBlackburn NNP I-NP I-PER\n")
    convert.ner(conll, tmp_path / "ner.spacy", sentences_per_doc=10, lang="en",
                strip_position_digit=False, limit=0, cats_from_entities=True)
    doc = list(DocBin().from_disk(tmp_path / "ner.spacy").get_docs(spacy.blank("en").vocab))[0]
    assert [(e.text, e.label_) for e in doc.ents] == [
        ("EU", "ORG"), ("German", "MISC"), ("Peter Blackburn", "PER")]
    assert len(list(doc.sents)) == 2
    assert doc.cats == {"ENTITY": 1.0, "NO_ENTITY": 0.0}
    weibo = tmp_path / "weibo.txt"
    weibo.write_text("北0\tB-GPE.NAM\n京1\tI-GPE.NAM\n好0\tO\n", encoding="utf-8")
    convert.ner(weibo, tmp_path / "weibo.spacy", sentences_per_doc=1, lang="zh",
                strip_position_digit=True, limit=0, cats_from_entities=False)
    doc = list(DocBin().from_disk(tmp_path / "weibo.spacy").get_docs(spacy.blank("zh").vocab))[0]
    assert doc.text == "北京好" and [e.text for e in doc.ents] == ["北京"]
    many = tmp_path / "many.txt"
    many.write_text("".join(f"w{i}\tB-PER\nx\tO\n\n" for i in range(20)), encoding="utf-8")
    convert.ner(many, tmp_path / "a.spacy", sentences_per_doc=1, lang="en",
                strip_position_digit=False, limit=0, cats_from_entities=False, split=0.25,
                split_output=tmp_path / "b.spacy", seed=0)
    vocab = spacy.blank("en").vocab
    a, b = (list(DocBin().from_disk(tmp_path / n).get_docs(vocab)) for n in ("a.spacy", "b.spacy"))
    assert (len(a), len(b)) == (15, 5)
    assert sorted(d.ents[0].text for d in a + b) == sorted(f"w{i}" for i in range(20))
    trec = tmp_path / "trec.txt"
    trec.write_text("DESC:manner How did serfdom develop ?\nHUM:ind Who was Caesar ?\n"
                    "NUM:date When ?\nHUM:gr Which team ?\n")
    convert.textcat(trec, tmp_path / "train.spacy", format="trec", lang="en", label_first=False,
                    multilabel=False, limit=0, split=0.5, split_output=tmp_path / "dev.spacy",
                    seed=0, label_names=None)
    vocab = spacy.blank("en").vocab
    train = list(DocBin().from_disk(tmp_path / "train.spacy").get_docs(vocab))
    dev = list(DocBin().from_disk(tmp_path / "dev.spacy").get_docs(vocab))
    assert len(train) == len(dev) == 2
    for doc in train + dev:
        assert sorted(doc.cats) == ["DESC", "HUM", "NUM"] and sum(doc.cats.values()) == 1.0
    # each question keeps its own coarse label
    assert {d.text: max(d.cats, key=d.cats.get) for d in train + dev} == {
        "How did serfdom develop ?": "DESC", "Who was Caesar ?": "HUM", "When ?": "NUM",
        "Which team ?": "HUM"}


def test_results_table_puts_models_down_tasks_across_with_the_difference_to_cnn():
    compare = results
    rows = {("ner", "cnn"): {0: {"dev": 90.0, "test": 85.0}},
            ("ner", "elmo"): {0: {"dev": 91.0, "test": 87.5}},
            ("trec", "elmo"): {0: {"dev": 80.0, "test": 78.0}},
            ("msra", "cnn"): {0: {"test": 70.0}}}
    lines = compare.score_table(rows, compare.ENGLISH)
    assert lines[0] == "| model | CoNLL-2003 NER (F1) | TREC-6 (accuracy) |"
    assert lines[2] == "| spaCy CNN baseline | 85.0 (90.0) | - |"
    assert lines[3] == "| ELMo listener | 87.5 (91.0) +2.5 | 78.0 (80.0) |"
    assert len(lines) == 4
    assert compare.score_table(rows, ["weibo"]) == []


def _metrics(directory, runs):
    directory.mkdir()
    for name, (dev, test) in runs.items():
        for split, value in (("dev", dev), ("test", test)):
            key = "cats_micro_f" if name.startswith("sst5") else "ents_f"
            srsly.write_json(directory / f"{name}.{split}.json", {key: value / 100})


def test_results_table_aggregates_seeds_as_mean_and_each_seed(tmp_path):
    compare = results
    _metrics(tmp_path / "m", {
        "ner_cnn": (90.0, 80.0),                # no suffix: seed 0
        "ner_cnn_s1": (91.0, 81.0),
        "ner_cnnw2vall_s0": (92.0, 84.0),
        "ner_cnnw2vall_s1": (93.0, 83.0),
        "ner_elmo_concat_w2v_s1": (94.0, 86.5),  # one seed only
        "sst5_cnnw2vsame_s0": (40.0, 41.0),
    })
    rows = compare.collect(tmp_path / "m")
    assert rows[("ner", "cnnw2vall")] == {0: {"dev": 92.0, "test": 84.0},
                                          1: {"dev": 93.0, "test": 83.0}}
    lines = compare.score_table(rows, compare.ENGLISH)
    assert lines[0] == "| model | CoNLL-2003 NER (F1) | SST-5 (accuracy) |"
    assert lines[2] == "| spaCy CNN baseline | 80.5 (80.0 / 81.0; dev 90.5) | - |"
    assert lines[3] == "| CNN + word2vec (same text) | - | 41.0 (40.0) [seed 0 only] |"
    assert lines[4] == ("| CNN + word2vec (all lm_en) | 83.5 (84.0 / 83.0; dev 92.5) +3.0 "
                        "| - |")
    # one seed: named, and compared with the baseline's same seed (81.0), not its mean
    assert lines[5] == "| [word2vec + features ; ELMo] | 86.5 (94.0) [seed 1 only] +5.5 | - |"
    assert len(lines) == 6
    _metrics(tmp_path / "dup", {"ner_cnn": (90.0, 80.0), "ner_cnn_s0": (90.0, 80.0)})
    with pytest.raises(typer.BadParameter, match="both seed 0 of ner_cnn"):
        compare.collect(tmp_path / "dup")


@pytest.mark.parametrize("table", ["en", "zh"])
def test_every_table_cell_has_its_config_and_overrides_that_exist(table):
    tasks = list(run_table.TABLES[table])
    values = {"weights": "W", "news_weights": "N", "jieba_weights": "J", "w2v": "V"}
    cells = run_table.make_cells(table, tasks, None, [0, 3], values, [])
    assert len({c.run for c in cells}) == len(cells)
    for cell in cells:
        config_path = ROOT / cell.needs[0]
        assert config_path.exists(), cell.run
        config = Config().from_disk(config_path, interpolate=False)
        args = cell.command[cell.command.index("--system.seed"):]
        assert args[1] == str(cell.seed)
        for key in args[2::2]:
            section = config
            *parents, leaf = key[2:].split(".")
            for part in parents:
                section = section[part]
            assert leaf in section, (cell.run, key)
        if cell.row.startswith("elmo"):
            weights = args[args.index("--paths.elmo_weights") + 1]
            expected = {"elmo_news": "N"}.get(cell.row, "J" if "jieba" in cell.task else "W")
            if cell.waits:  # THUCNews' concat rows: the biLM that elmo/elmo_news choose
                expected = CHOSEN_LATER
                assert cell.task == "thucnews" and cell.row not in ("elmo", "elmo_news")
            assert weights == expected, cell.run
    rows = {(c.task, c.row) for c in cells}
    if table == "en":
        assert ("ner", "elmo_ft") in rows and ("sst5", "elmo_ft") not in rows
        assert all((t, r) in rows for t in tasks for r in ("cnn", "cnnw2vsame", "cnnw2vall",
                                                           "elmo_concat_w2v"))
    else:
        assert ("thucnews", "elmo_news") in rows and ("msra", "cnnw2v") in rows


def _tiny_trec_project(tmp_path, monkeypatch):
    """A project directory with the configs and a 4-question TREC corpus, as the cwd."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "configs").symlink_to(ROOT / "configs")
    nlp = spacy.blank("en")
    corpus = tmp_path / "corpus" / "trec"
    corpus.mkdir(parents=True)
    texts = [("How far is it ?", "NUM"), ("Who wrote it ?", "HUM"), ("When was it ?", "NUM"),
             ("Who is he ?", "HUM")]
    for split in ("train", "dev", "test"):
        docs = []
        for text, label in texts:
            doc = nlp(text)
            doc.cats = {"NUM": float(label == "NUM"), "HUM": float(label == "HUM")}
            docs.append(doc)
        DocBin(docs=docs).to_disk(corpus / f"{split}.spacy")


def test_table_runner_trains_evaluates_and_skips_finished_cells(tmp_path, monkeypatch,
                                                                capsys):
    _tiny_trec_project(tmp_path, monkeypatch)
    settings = dict(tasks="trec", rows="cnn,cnnpre", seeds="0", weights="null",
                    news_weights="N", jieba_weights="J", max_steps=2, eval_frequency=1,
                    gpu_id=-1, jobs=1, dry_run=False,
                    summary=tmp_path / "results" / "table.json", archive=None)
    with pytest.raises(typer.Exit) as stop:  # not 0: the project must not record the table
        run_table.main("en", **settings)
    assert stop.value.exit_code == 1
    out = capsys.readouterr()
    assert "skipped: missing pretrain_cnn/model-last.bin" in out.out
    assert "1 cell(s) skipped for missing inputs" in out.err
    record = srsly.read_json(tmp_path / "training" / "trec_cnn_s0" / "cell.json")
    test = srsly.read_json(tmp_path / "metrics" / "trec_cnn_s0.test.json")
    assert record["test"] == pytest.approx(100 * test["cats_micro_f"])
    assert "--system.seed 0" in record["command"]
    assert not settings["summary"].exists()  # one cell could not run
    with pytest.raises(typer.Exit):
        run_table.main("en", **settings)
    assert "2 cells, 1 finished, 1 to run" in capsys.readouterr().out
    run_table.main("en", **{**settings, "rows": "cnn"})
    assert "1 cells, 1 finished, 0 to run" in capsys.readouterr().out
    assert srsly.read_json(settings["summary"]) == {"trec_cnn_s0": record}


def test_table_runner_restores_archived_cells_on_a_new_machine(tmp_path, monkeypatch, capsys):
    _tiny_trec_project(tmp_path, monkeypatch)
    archive = tmp_path / "benchmarks" / "cells"
    settings = dict(tasks="trec", rows="cnn", seeds="0", weights="null", news_weights="N",
                    jieba_weights="J", max_steps=2, eval_frequency=1, gpu_id=-1, jobs=1,
                    dry_run=False, summary=None, archive=archive)
    run_table.main("en", **settings)
    record = srsly.read_json(tmp_path / "training" / "trec_cnn_s0" / "cell.json")
    metrics = {s: srsly.read_json(tmp_path / "metrics" / f"trec_cnn_s0.{s}.json")
               for s in ("dev", "test")}
    assert srsly.read_json(archive / "trec_cnn_s0.json") == {**record, "metrics": metrics}
    # a new machine: nothing but the committed archive
    shutil.rmtree(tmp_path / "training")
    shutil.rmtree(tmp_path / "metrics")
    capsys.readouterr()
    run_table.main("en", **settings)
    out = capsys.readouterr()
    assert "1 cells, 1 finished, 0 to run" in out.out
    assert "restored from" in out.err
    assert srsly.read_json(tmp_path / "training" / "trec_cnn_s0" / "cell.json") == record
    for split, data in metrics.items():
        assert srsly.read_json(tmp_path / "metrics" / f"trec_cnn_s0.{split}.json") == data
    assert not (tmp_path / "training" / "trec_cnn_s0" / "model-best").exists()
    # other settings: the archived cell is trained again and its archive replaced
    run_table.main("en", **{**settings, "max_steps": 3})
    assert "1 cells, 0 finished, 1 to run" in capsys.readouterr().out
    again = srsly.read_json(archive / "trec_cnn_s0.json")
    assert "--training.max_steps 3" in again["command"]
    assert (tmp_path / "training" / "trec_cnn_s0" / "model-best").exists()


def test_table_runner_runs_cells_in_parallel_and_reports_a_failed_one(tmp_path, monkeypatch,
                                                                      capsys):
    _tiny_trec_project(tmp_path, monkeypatch)
    budget = ["--training.max_steps", "2", "--training.eval_frequency", "1"]
    good = run_table.make_cells("en", ["trec"], ["cnn"], [0, 1], {"weights": "null"}, budget)
    bad = run_table.Cell("trec", "broken", 0, Path("corpus/trec"),
                         [sys.executable, "-c", "import os, sys; "
                          "print('threads', os.environ['OMP_NUM_THREADS']); sys.exit(3)"], [])
    training, metrics = tmp_path / "training", tmp_path / "metrics"
    failed = run_table.run_cells([bad, *good], training, metrics, -1, jobs=2)
    assert failed == ["trec_broken_s0"]
    threads = max(1, run_table.cores() // 2)
    assert (training / "trec_broken_s0" / "train.log").read_text().strip() == f"threads {threads}"
    assert not (training / "trec_broken_s0" / "cell.json").exists()
    # the cells already running when it failed finished; none started after it
    finished = [c for c in good if (training / c.run / "cell.json").exists()]
    for cell in finished:
        record = srsly.read_json(training / cell.run / "cell.json")
        assert record["threads"] == threads and "--system.seed" in record["command"]
        test = srsly.read_json(metrics / f"{cell.run}.test.json")
        assert record["test"] == pytest.approx(100 * test["cats_micro_f"])
        assert "Training pipeline" in (training / cell.run / "train.log").read_text()
    assert len(finished) == 1  # with 2 jobs: the first good cell ran beside the broken one
    assert "trec_broken_s0 failed" in capsys.readouterr().err
