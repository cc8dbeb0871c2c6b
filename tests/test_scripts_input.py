"""The input-reading scripts (convert, holdout, raw_text, wic) on awkward input: a byte
order mark, other tag schemes, bad arguments, files that are not UTF-8. Errors a user can
cause are clear messages (typer.BadParameter, printed as one message with exit status 1
by messages.one_line_errors, no traceback) naming the file and line, and a failed run
leaves the outputs already there as they were."""

import gzip
import json

import pytest
import spacy
import typer
from spacy.tokens import DocBin
from spacy_elmo_lab import convert, holdout, raw_text
from spacy_elmo_lab.messages import one_line_errors
from typer.testing import CliRunner

from .test_wic_probe import ROWS, wic, write_wic

BOM = "\ufeff"


def _docs(path, lang="en"):
    return list(DocBin().from_disk(path).get_docs(spacy.blank(lang).vocab))


def _source(tmp_path, name, text):
    """An input file of `text` (str: UTF-8; bytes: as they are)."""
    source = tmp_path / name
    if isinstance(text, bytes):
        source.write_bytes(text)
    else:
        source.write_text(text, encoding="utf-8")
    return source


def _ner(tmp_path, text, name="ner.txt", **kwargs):
    source = _source(tmp_path, name, text)
    out = tmp_path / "ner.spacy"
    convert.ner(source, out, **{"sentences_per_doc": 1, "overwrite": True, **kwargs})
    return _docs(out)


def _textcat(tmp_path, text, name="rows.txt", **kwargs):
    source = _source(tmp_path, name, text)
    out = tmp_path / "cats.spacy"
    convert.textcat(source, out, **{"overwrite": True, **kwargs})
    return {d.text: [label for label, v in d.cats.items() if v] for d in _docs(out)}


def _cli(main, args):
    """Run a `typer.run` script's main through the CLI as a user would (as the script
    runs it: through one_line_errors)."""
    app = typer.Typer(add_completion=False)
    app.command()(one_line_errors(main))
    return CliRunner().invoke(app, [str(a) for a in args])


def _assert_clean_failure(result):
    """One line on stderr and exit 1, as the docs say (click's usage box exited 2)."""
    assert result.exit_code == 1, result.output
    assert isinstance(result.exception, SystemExit)  # a message, not a raw exception
    assert "Traceback" not in result.output and "Invalid value" not in result.output
    assert result.stderr.startswith("✘") and "Usage:" not in result.output, result.output


# 1. a UTF-8 byte order mark


def test_ner_file_with_a_bom_has_no_docstart_document(tmp_path):
    docs = _ner(tmp_path, BOM + "-DOCSTART- -X- -X- O\n\nEU NNP B-NP B-ORG\nrejects VBZ B-VP O\n")
    assert [d.text for d in docs] == ["EU rejects"]
    assert [(e.text, e.label_) for e in docs[0].ents] == [("EU", "ORG")]


def test_sst_file_with_a_bom_keeps_the_first_label(tmp_path):
    cats = _textcat(tmp_path, BOM + "3 a good movie\n1 a bad one\n", format="sst")
    assert cats == {"a good movie": ["3"], "a bad one": ["1"]}


def test_tsv_label_first_with_label_names_and_bom_in_both_files(tmp_path):
    names = tmp_path / "class.txt"
    names.write_text(BOM + "sports\nfinance\n", encoding="utf-8")
    cats = _textcat(tmp_path, BOM + "0\tgoal scored\n1\tstocks fell\n", format="tsv",
                    label_first=True, label_names=names)
    assert cats == {"goal scored": ["sports"], "stocks fell": ["finance"]}


def test_raw_text_skips_a_title_line_that_starts_with_a_bom(tmp_path):
    source, out = tmp_path / "wiki.txt", tmp_path / "raw.jsonl"
    source.write_text(BOM + "= Title =\nSome text .\n\n= = Section = =\nMore .\n",
                      encoding="utf-8")
    raw_text.main(source, out)
    assert [r["text"] for r in map(json.loads, out.read_text().splitlines())] == [
        "Some text .", "More ."]


# 2. --label-names: one name per line, indices checked


def test_label_names_are_whole_lines_so_a_name_with_a_space_shifts_nothing(tmp_path):
    names = tmp_path / "class.txt"
    names.write_text("sports news\nfinance\n\n", encoding="utf-8")
    cats = _textcat(tmp_path, "goal\t0\nstocks\t1\n", format="tsv", label_names=names)
    assert cats == {"goal": ["sports news"], "stocks": ["finance"]}


@pytest.mark.parametrize("label", ["2", "-1", "finance"])
def test_label_outside_the_names_is_a_clear_error_naming_the_line(tmp_path, label):
    names = tmp_path / "class.txt"
    names.write_text("sports\nfinance\n", encoding="utf-8")
    out = tmp_path / "cats.spacy"
    out.write_bytes(b"old")
    with pytest.raises(typer.BadParameter, match=r"rows\.txt:2: .*0 to 1"):
        _textcat(tmp_path, f"goal\t0\nstocks\t{label}\n", format="tsv", label_names=names)
    assert out.read_bytes() == b"old"


def test_missing_label_names_file_is_a_clear_error(tmp_path):
    with pytest.raises(typer.BadParameter, match="no such --label-names file"):
        _textcat(tmp_path, "goal\t0\n", format="tsv", label_names=tmp_path / "nope.txt")


# 3. --split and --split-output


@pytest.mark.parametrize("split", [0, 1, 1.5, -0.2])
def test_split_must_be_a_fraction_between_0_and_1(tmp_path, split):
    text = "".join(f"w{i}\tB-PER\n\n" for i in range(10))
    out, dev = tmp_path / "ner.spacy", tmp_path / "dev.spacy"
    with pytest.raises(typer.BadParameter, match="between 0 and 1"):
        _ner(tmp_path, text, split=split, split_output=dev)
    assert not out.exists() and not dev.exists()
    with pytest.raises(typer.BadParameter, match="between 0 and 1"):
        _textcat(tmp_path, "3 good\n1 bad\n", format="sst", split=split, split_output=dev)


def test_split_and_split_output_need_each_other(tmp_path):
    with pytest.raises(typer.BadParameter, match="--split-output needs --split"):
        _ner(tmp_path, "w\tB-PER\n", split_output=tmp_path / "dev.spacy")
    with pytest.raises(typer.BadParameter, match="--split needs --split-output"):
        _ner(tmp_path, "w\tB-PER\n", split=0.5)
    with pytest.raises(typer.BadParameter, match="--split-output needs --split"):
        _textcat(tmp_path, "3 good\n", format="sst", split_output=tmp_path / "dev.spacy")


def test_split_that_leaves_a_part_empty_fails_and_keeps_old_outputs(tmp_path):
    out, dev = tmp_path / "ner.spacy", tmp_path / "dev.spacy"
    out.write_bytes(b"old train")
    dev.write_bytes(b"old dev")
    text = "".join(f"w{i}\tB-PER\n\n" for i in range(10))
    with pytest.raises(typer.BadParameter, match=r"--split 0\.05 of 10 sentences leaves 0"):
        _ner(tmp_path, text, split=0.05, split_output=dev)
    assert out.read_bytes() == b"old train" and dev.read_bytes() == b"old dev"
    with pytest.raises(typer.BadParameter, match="leaves 0 for"):
        _textcat(tmp_path, "3 good\n1 bad\n", format="sst", split=0.4, split_output=dev)
    assert _ner(tmp_path, text, split=0.1, split_output=dev)  # 9 and 1 is fine
    assert len(_docs(dev)) == 1 and not list(tmp_path.glob(".tmp-*"))


# 4. NER tag schemes


def test_lowercase_prefixes_are_read_like_uppercase_ones(tmp_path):
    docs = _ner(tmp_path, "Peter b-per\nBlackburn i-per\nin o\nEU s-org\n")
    assert [(e.text, e.label_) for e in docs[0].ents] == [
        ("Peter Blackburn", "per"), ("EU", "org")]


@pytest.mark.parametrize("tags,expected", [
    (["b-per", "i-per", "o", "b-loc"], ["B-per", "L-per", "O", "U-loc"]),
    (["s-ORG", "O", "b-NAME", "m-NAME", "e-NAME"],
     ["U-ORG", "O", "B-NAME", "I-NAME", "L-NAME"]),
    (["I-ORG", "I-ORG", "O"], ["B-ORG", "L-ORG", "O"]),  # inside without begin: repaired
    (["O", "L-ORG", "O"], ["O", "U-ORG", "O"]),          # a stray last tag
    (["B-ORG", "O", "M-ORG"], ["U-ORG", "O", "U-ORG"]),
])
def test_tag_schemes_in_either_case_to_biluo(tags, expected):
    assert convert._to_biluo(tags) == expected


@pytest.mark.parametrize("tag", ["PER", "B_PER", "B-", "X-PER", "Outside"])
def test_tag_of_no_known_scheme_is_a_clear_error(tmp_path, tag):
    with pytest.raises(typer.BadParameter) as err:
        _ner(tmp_path, f"EU B-ORG\nPeter {tag}\n")
    message = str(err.value)
    assert "ner.txt:2" in message and repr(tag) in message
    assert all(s in message for s in ("BIO/IOB", "BIOES/BILOU", "BMES"))
    with pytest.raises(ValueError, match="not understood"):
        convert._to_biluo(["O", tag])


def test_token_line_without_a_tag_column_is_a_clear_error(tmp_path):
    out = tmp_path / "ner.spacy"
    out.write_bytes(b"old")
    with pytest.raises(typer.BadParameter, match=r"ner\.txt:3: .*'Blackburn' has no tag"):
        _ner(tmp_path, "EU B-ORG\n\nBlackburn\n")
    assert out.read_bytes() == b"old"


# 5. textcat rows, formats and other arguments


def test_sst_label_may_be_followed_by_a_tab(tmp_path):
    cats = _textcat(tmp_path, "3\ta good movie\n1 a bad  one \n", format="sst")
    assert cats == {"a good movie": ["3"], "a bad one": ["1"]}


@pytest.mark.parametrize("fmt,text,match", [
    ("sst", "3 fine\n4\n", r"rows\.txt:2: only a label"),
    ("sst", "3 fine\ngood movie\n", r"rows\.txt:2: the label 'good' is not a number"),
    ("trec", "HUM:ind Who ?\nWho was it ?\n", r"rows\.txt:2: .*not COARSE:fine"),
    ("tsv", "goal\t0\nno tab here\n", r"rows\.txt:2: no tab"),
    ("tsv", "goal\t0\na good movie\tpos\tEXTRA\n", r"rows\.txt:2: 3 columns; tsv lines"),
    ("tsv", "goal\t0\n\t1\n", r"rows\.txt:2: no text"),
])
def test_bad_rows_are_clear_errors_naming_the_line(tmp_path, fmt, text, match):
    with pytest.raises(typer.BadParameter, match=match):
        _textcat(tmp_path, text, format=fmt)


def test_unknown_format_is_an_error_not_tsv(tmp_path):
    with pytest.raises(typer.BadParameter, match="--format must be one of sst, trec, tsv"):
        _textcat(tmp_path, "3 good\n", format="SST")
    source, out = tmp_path / "rows.txt", tmp_path / "cats.spacy"
    result = CliRunner().invoke(convert.app, ["textcat", str(source), str(out),
                                              "--format", "SST"])
    _assert_clean_failure(result)
    assert not out.exists()


def test_sentences_per_doc_must_be_positive(tmp_path):
    with pytest.raises(typer.BadParameter, match="--sentences-per-doc"):
        _ner(tmp_path, "EU B-ORG\n", sentences_per_doc=0)


def test_non_utf8_input_is_a_clear_error_naming_the_line(tmp_path):
    with pytest.raises(typer.BadParameter, match=r"ner\.txt:2: not UTF-8"):
        _ner(tmp_path, b"EU B-ORG\n" + "Zürich B-LOC\n".encode("latin-1"))
    with pytest.raises(typer.BadParameter, match=r"rows\.txt:3: not UTF-8"):
        _textcat(tmp_path, b"3 good\n1 bad\n" + "2 café\n".encode("latin-1"),
                 format="sst")


@pytest.mark.parametrize("text", ["", "\n\n", BOM, "-DOCSTART- -X- -X- O\n\n"])
def test_empty_input_fails_instead_of_writing_no_docs(tmp_path, text):
    with pytest.raises(typer.BadParameter, match="no sentences"):
        _ner(tmp_path, text)
    if "DOCSTART" not in text:
        with pytest.raises(typer.BadParameter, match="no rows"):
            _textcat(tmp_path, text, format="sst")
    assert not (tmp_path / "ner.spacy").exists() and not (tmp_path / "cats.spacy").exists()


def test_missing_input_is_a_clear_error(tmp_path):
    with pytest.raises(typer.BadParameter, match="no such input file"):
        convert.ner(tmp_path / "nope.txt", tmp_path / "ner.spacy")


# 6. holdout.py and raw_text.py: arguments first, outputs written atomically


def _old_outputs(tmp_path):
    train, dev = tmp_path / "train.txt", tmp_path / "dev.txt"
    train.write_text("old train\n")
    dev.write_text("old dev\n")
    return train, dev


@pytest.mark.parametrize("every", [0, 1, -3])
def test_holdout_checks_every_before_touching_the_outputs(tmp_path, every):
    source = tmp_path / "corpus.txt"
    source.write_text("".join(f"line {i}\n" for i in range(10)))
    train, dev = _old_outputs(tmp_path)
    with pytest.raises(typer.BadParameter, match="--every must be 2 or more"):
        holdout.main(source, train, dev, every=every)
    assert train.read_text() == "old train\n" and dev.read_text() == "old dev\n"
    _assert_clean_failure(_cli(holdout.main, [source, train, dev, "--every", every]))
    assert train.read_text() == "old train\n" and dev.read_text() == "old dev\n"


def test_holdout_gives_the_same_gzip_bytes_on_a_rerun(tmp_path):
    """`spacy project` compares deps by checksum: a rerun must not look like new data."""
    source = tmp_path / "corpus.txt"
    source.write_text("".join(f"línea {i}\n" for i in range(25)), encoding="utf-8")
    outputs = []
    for run in ("a", "b"):
        train = tmp_path / run / "train.txt.gz"
        holdout.main(source, train, tmp_path / run / "dev.txt", every=10)
        outputs.append(train.read_bytes())
    assert outputs[0] == outputs[1]
    lines = gzip.decompress(outputs[0]).decode("utf-8").splitlines()
    assert len(lines) == 23 and lines[0] == "línea 0" and "línea 9" not in lines


def test_holdout_failure_midway_leaves_the_old_outputs(tmp_path):
    source = tmp_path / "corpus.txt"
    # beyond the first chunk a text reader decodes: lines were written before the error
    source.write_bytes("".join(f"line {i}\n" for i in range(3000)).encode()
                       + "caf\u00e9\n".encode("latin-1"))
    train, dev = _old_outputs(tmp_path)
    with pytest.raises(typer.BadParameter, match=r"corpus\.txt:3001: not UTF-8"):
        holdout.main(source, train, dev, every=10, overwrite=True)
    assert train.read_text() == "old train\n" and dev.read_text() == "old dev\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["corpus.txt", "dev.txt",
                                                          "train.txt"]
    with pytest.raises(typer.BadParameter, match="fewer than --every 100"):
        holdout.main(tmp_path / "train.txt", tmp_path / "t.txt", dev, every=100, overwrite=True)
    assert not (tmp_path / "t.txt").exists() and dev.read_text() == "old dev\n"


def test_holdout_splits_drops_a_bom_and_compresses_gz(tmp_path):
    source = tmp_path / "corpus.txt"
    source.write_text(BOM + "".join(f"line {i}\n" for i in range(1, 7)), encoding="utf-8")
    train, dev = tmp_path / "out" / "train.txt.gz", tmp_path / "out" / "dev.txt"
    holdout.main(source, train, dev, every=3)
    with gzip.open(train, "rt", encoding="utf-8") as f:
        assert f.read() == "line 1\nline 2\nline 4\nline 5\n"
    assert dev.read_text(encoding="utf-8") == "line 3\nline 6\n"


def test_raw_text_non_utf8_input_keeps_the_old_output(tmp_path):
    source, out = tmp_path / "wiki.txt", tmp_path / "raw.jsonl"
    source.write_bytes(b"Some text .\n" + "caf\u00e9 .\n".encode("latin-1"))
    out.write_text('{"text":"old"}\n')
    with pytest.raises(typer.BadParameter, match=r"wiki\.txt:2: not UTF-8"):
        raw_text.main(source, out, overwrite=True)
    assert out.read_text() == '{"text":"old"}\n'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["raw.jsonl", "wiki.txt"]
    _assert_clean_failure(_cli(raw_text.main, [source, out, "--overwrite"]))
    assert out.read_text() == '{"text":"old"}\n'


@pytest.mark.parametrize("args,match", [
    (["--limit", "-1"], "--limit"),
    (["--skip-pattern", "(unclosed"], "--skip-pattern"),
])
def test_raw_text_checks_its_arguments(tmp_path, args, match):
    source, out = tmp_path / "wiki.txt", tmp_path / "raw.jsonl"
    source.write_text("Some text .\n")
    _assert_clean_failure(_cli(raw_text.main, [source, out, *args]))
    assert not out.exists()


# 7. wic.read_wic


def test_wic_gold_shorter_than_the_data_is_a_clear_error(tmp_path):
    write_wic(tmp_path, "train", ROWS)
    gold = tmp_path / "train" / "train.gold.txt"
    gold.write_text("F\nT\n")
    with pytest.raises(typer.BadParameter, match="2 labels for the 4 pairs"):
        wic.read_wic(tmp_path, "train")
    gold.write_text("F\nT\nF\nyes\n")
    with pytest.raises(typer.BadParameter, match="not T or F"):
        wic.read_wic(tmp_path, "train")


def test_wic_blank_lines_at_the_end_of_the_data_are_ignored(tmp_path):
    write_wic(tmp_path, "train", ROWS)
    data = tmp_path / "train" / "train.data.txt"
    data.write_text(data.read_text() + "\n\n")
    assert [p.same for p in wic.read_wic(tmp_path, "train")] == [False, True, False, True]
