"""Every lab command that writes a file checks its outputs first
(spacy_elmo.files.guard.guard_output): an output that is one of its inputs is refused
(E025), even with --overwrite, and an existing output is refused without --overwrite
(E026); each refusal is one line and exit status 1, with the files left as they were."""

from pathlib import Path

import pytest
import typer
from spacy_elmo_lab import (
    convert,
    dev_curves,
    holdout,
    mix_text,
    probe_pos,
    probe_wsd,
    raw_text,
    wic,
    word2vec,
)
from typer.testing import CliRunner

ROOT = Path(__file__).resolve().parents[2]

CONLL = "EU B-ORG\nrejects O\n\nPeter B-PER\n"
WIC_ROW = "bank\tN\t0-1\tbank one\ttwo bank\n"


def _invoke(main, args):
    if isinstance(main, typer.Typer):
        app = main
    else:
        app = typer.Typer(add_completion=False)
        app.command()(main)
    result = CliRunner().invoke(app, [str(a) for a in args])
    return result.exit_code, result.output


def _wic_dir(root: Path) -> Path:
    for split in ("train", "dev"):
        (root / split).mkdir(parents=True)
        (root / split / f"{split}.data.txt").write_text(WIC_ROW, encoding="utf-8")
        (root / split / f"{split}.gold.txt").write_text("T\n", encoding="utf-8")
    return root


def _cases(tmp: Path):
    """(command, CLI, the arguments with OUT for the output and the input it may not be,
    the input, the output that exists)."""
    conll = tmp / "ner.txt"
    conll.write_text(CONLL, encoding="utf-8")
    sst = tmp / "sst.txt"
    sst.write_text("3 a good film\n1 a bad one\n", encoding="utf-8")
    text = tmp / "text.txt"
    text.write_text("".join(f"line {i}\n" for i in range(200)), encoding="utf-8")
    wic_dir = _wic_dir(tmp / "wic")
    runs = tmp / "training"
    (runs / "ner_elmo_s0").mkdir(parents=True)
    log = runs / "ner_elmo_s0" / "train.log"
    log.write_text("E    #       LOSS NER  ENTS_F  SCORE\n  0     500     1.00   61.36    0.61\n",
                   encoding="utf-8")
    (runs / "ner_elmo_s0" / "cell.json").write_text("{}", encoding="utf-8")
    taken = tmp / "taken.out"
    return {
        "dev_curves": (dev_curves.main, [runs, "--output", "OUT"], log),
        "convert ner": (convert.app, ["ner", conll, "OUT"], conll),
        "convert textcat": (convert.app, ["textcat", sst, "OUT"], sst),
        "convert ner --split-output": (
            convert.app, ["ner", conll, tmp / "a.spacy", "--split", "0.5", "--split-output",
                          "OUT"], conll),
        "holdout TRAIN_OUT": (holdout.main, [text, "OUT", tmp / "dev.txt"], text),
        "holdout DEV_OUT": (holdout.main, [text, tmp / "train.txt", "OUT"], text),
        "raw_text": (raw_text.main, [text, "OUT"], text),
        "mix_text": (mix_text.main, ["OUT", text, sst], sst),
        "wic --out": (wic.main, [tmp / "weights", wic_dir, "--out", "OUT"],
                               wic_dir / "dev" / "dev.data.txt"),
        "wic --json": (wic.main, [tmp / "weights", wic_dir, "--json", "OUT"],
                                wic_dir / "train" / "train.gold.txt"),
        "word2vec": (word2vec.main, ["OUT", text], text),
        "probe_wsd": (probe_wsd.main, [text, tmp / "wsd", "--output", "OUT"], text),
        "probe_pos": (probe_pos.main, [tmp / "ud", "--weights", text, "--output", "OUT"],
                         text),
    }, taken


def _fill(args, out):
    return [out if a == "OUT" else a for a in args]


# commands that write no file a user names, or that keep a resumable directory of their own
# by design (they skip or redo their own records), with why
NOT_FILE_OUTPUTS = {
    "run_table": "resumable training/ and metrics/ directories of its own cells",
    "curve": "a resumable run directory (OUTPUT/<biLM>/done.json)",
    "bundled_history": "snapshots kept per commit, written atomically",
    "bundle": "stages the bundle beside OUTPUT and swaps it in whole",
    "results": "regenerates OUTPUT_DIR/results.md and its figures",
    "evaluate": "metrics/<run>.{dev,test}.json of each run, regenerated",
    "similarity_demo": "writes nothing",
    "migrate_records": "rewrites the records it is given in place, idempotently",
}


def test_every_command_is_walked(tmp_path):
    cases, _ = _cases(tmp_path)
    walked = {name.split()[0] for name in cases}
    commands = {p.stem for p in (ROOT / "lab" / "spacy_elmo_lab").glob("*.py")
                if 'if __name__ == "__main__":' in p.read_text(encoding="utf-8")}
    assert walked | set(NOT_FILE_OUTPUTS) == commands
    assert not walked & set(NOT_FILE_OUTPUTS)


def test_an_output_that_is_an_input_is_refused_even_with_overwrite(tmp_path):
    cases, _ = _cases(tmp_path)
    for name, (main, args, source) in cases.items():
        before = source.read_bytes()
        for extra in ([], ["--overwrite"]):
            code, output = _invoke(main, _fill(args, source) + extra)
            assert code == 1 and "[E025]" in output, (name, extra, output)
            assert "Traceback" not in output and source.read_bytes() == before, name


def test_an_existing_output_needs_overwrite(tmp_path):
    cases, taken = _cases(tmp_path)
    for name, (main, args, _) in cases.items():
        out = taken if "word2vec" not in name else tmp_path / "w2v"
        if "word2vec" in name:  # OUTPUT_DIR: its vectors.txt exists
            out.mkdir(exist_ok=True)
            (out / "vectors.txt").write_text("old", encoding="utf-8")
        else:
            out.write_text("old", encoding="utf-8")
        code, output = _invoke(main, _fill(args, out))
        assert code == 1 and "[E026]" in output and "--overwrite" in output, (name, output)
        written = out / "vectors.txt" if out.is_dir() else out
        assert written.read_text(encoding="utf-8") == "old", name


@pytest.mark.parametrize("script", ["convert ner", "holdout TRAIN_OUT", "raw_text",
                                    "dev_curves"])
def test_overwrite_replaces_an_existing_output(tmp_path, script):
    cases, taken = _cases(tmp_path)
    main, args, _ = cases[script]
    taken.write_text("old", encoding="utf-8")
    code, output = _invoke(main, _fill(args, taken) + ["--overwrite"])
    assert code == 0, output
    assert taken.read_bytes() != b"old"


def test_word2vec_output_dir_that_is_its_input_file_is_one_line_not_file_exists(tmp_path):
    """Issue 31: `word2vec IN IN` died with a bare FileExistsError."""
    text = tmp_path / "in.txt"
    text.write_text("a b c\n", encoding="utf-8")
    code, output = _invoke(word2vec.main, [text, text])
    assert code == 1 and "[E025]" in output and "FileExistsError" not in output
    other = tmp_path / "file.txt"
    other.write_text("x", encoding="utf-8")
    code, output = _invoke(word2vec.main, [other, text])
    assert code == 1 and "[E028]" in output
