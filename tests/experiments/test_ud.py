"""The UD table's pieces: CoNLL-U conversion and the table of every UD score."""

import json
from pathlib import Path

import pytest
import spacy
from spacy.tokens import DocBin
from spacy_elmo_lab.convert import app
from spacy_elmo_lab.results import MODELS, parse_run, score
from spacy_elmo_lab.ud import collect_ud, ud_table
from typer.testing import CliRunner

SAMPLE = Path(__file__).resolve().parents[1] / "fixtures" / "ud_ewt_sample" / "dev.conllu"
runner = CliRunner()


def test_conllu_converts_every_annotation_and_guards_its_output(tmp_path):
    out = tmp_path / "dev.spacy"
    result = runner.invoke(app, ["conllu", str(SAMPLE), str(out)])
    assert result.exit_code == 0, result.output
    docs = list(DocBin().from_disk(out).get_docs(spacy.blank("en").vocab))
    assert len(docs) == 16  # one sentence per doc
    first = docs[0]
    for attr in ("TAG", "POS", "MORPH", "LEMMA", "DEP"):
        assert first.has_annotation(attr), attr
    before = out.read_bytes()
    again = runner.invoke(app, ["conllu", str(SAMPLE), str(out)])
    assert again.exit_code != 0 and "E026" in again.output
    assert out.read_bytes() == before
    assert runner.invoke(app, ["conllu", str(SAMPLE), str(out), "--overwrite"]).exit_code == 0
    same = runner.invoke(app, ["conllu", str(SAMPLE), str(SAMPLE), "--overwrite"])
    assert same.exit_code != 0 and "E025" in same.output


def _metrics(directory: Path, run: str, split: str, las: float) -> None:
    data = {"pos_acc": 0.95, "tag_acc": 0.94, "morph_acc": 0.93, "lemma_acc": 0.97,
            "dep_uas": las + 0.03, "dep_las": las, "ents_f": None}
    (directory / f"{run}.{split}.json").write_text(json.dumps(data), encoding="utf-8")


def test_the_ud_table_shows_every_score_and_the_LAS_difference(tmp_path):
    for seed, (cnn, elmo) in enumerate(((0.80, 0.84), (0.82, 0.86))):
        for split, shift in (("test", 0.0), ("dev", 0.01)):
            _metrics(tmp_path, f"ud_cnn_s{seed}", split, cnn + shift)
            _metrics(tmp_path, f"ud_elmo_s{seed}", split, elmo + shift)
    _metrics(tmp_path, "ner_cnn_s0", "test", 0.5)  # another table's run: not in this one
    lines = ud_table(collect_ud(tmp_path, parse_run), MODELS)
    assert lines[0].startswith("| model | seeds | UPOS | XPOS | Features | Lemma | UAS | LAS |")
    cnn, elmo = lines[2], lines[3]
    assert cnn.startswith("| spaCy CNN baseline | 0, 1 | 95.00 | 94.00 | 93.00 | 97.00 | 84.00 "
                          "| 81.00 | 82.00 |")
    assert elmo.startswith("| ELMo listener | 0, 1 |") and "| 85.00 | 86.00 | +4.00 |" in elmo
    assert len(lines) == 4


def test_a_parser_s_table_figure_is_its_LAS():
    assert score({"dep_las": 0.8123, "ents_f": None, "tag_acc": 0.9}) == pytest.approx(81.23)
    assert score({"ents_f": 0.5}) == pytest.approx(50.0)
    with pytest.raises(KeyError):
        score({"tag_acc": 0.9})


@pytest.mark.parametrize("content", ["", "a\tO\nb\tB-X\n"])
def test_a_file_that_is_not_conllu_is_one_line(tmp_path, content):
    """An empty or NER file printed a 60-line traceback."""
    source = tmp_path / "in.txt"
    source.write_text(content, encoding="utf-8")
    result = runner.invoke(app, ["conllu", str(source), str(tmp_path / "out.spacy")])
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit)  # not 2
    assert "CoNLL-U" in result.output and "Traceback" not in result.output
    assert result.stderr.startswith("✘") and "Usage:" not in result.output  # no click box
    assert not (tmp_path / "out.spacy").exists()
