"""spacy_elmo_lab.mix_text: corpora mixed at weights, each spread through the output."""

import gzip

import pytest
import typer
from spacy_elmo_lab.mix_text import main


def _write(path, prefix, n):
    path.write_text("".join(f"{prefix}{i}\n" for i in range(n)), encoding="utf-8")
    return path


def _mix(tmp_path, weights, seed=0, name="mixed.txt.gz"):
    wiki = _write(tmp_path / "wiki.txt", "w", 400)
    laws = _write(tmp_path / "laws.txt", "l", 400)
    out = tmp_path / name
    main(out, [wiki, laws], weights=weights, seed=seed, overwrite=True)
    with gzip.open(out, "rt", encoding="utf-8") as f:
        return f.read().splitlines()


def test_a_weighted_corpus_is_a_sample_spread_through_the_whole_output(tmp_path):
    lines = _mix(tmp_path, "1,0.25")
    wiki = [line for line in lines if line.startswith("w")]
    laws = [line for line in lines if line.startswith("l")]
    assert wiki == [f"w{i}" for i in range(400)]  # weight 1: every line, in order
    assert 60 < len(laws) < 140  # about a quarter of 400
    assert laws == sorted(laws, key=lambda line: int(line[1:]))  # in their own order
    # spread, not a block: each quarter of the output holds some of them
    quarters = [lines[i * len(lines) // 4:(i + 1) * len(lines) // 4] for i in range(4)]
    assert all(5 < sum(line.startswith("l") for line in q) < 50 for q in quarters)
    assert _mix(tmp_path, "1,0.25") == lines  # seeded
    assert _mix(tmp_path, "1,0.25", seed=1) != lines


@pytest.mark.parametrize("weights,message", [
    ("1", r"1 number\(s\) for 2 input\(s\)"), ("1,0", "above 0 and at most 1"),
    ("1,2", "above 0 and at most 1"), ("1,x", "numbers separated by commas")])
def test_bad_weights_are_refused_before_anything_is_written(tmp_path, weights, message):
    with pytest.raises(typer.BadParameter, match=message):
        _mix(tmp_path, weights, name="never.txt")
    assert not (tmp_path / "never.txt").exists()


def test_an_existing_output_is_kept_without_overwrite(tmp_path):
    wiki = _write(tmp_path / "wiki.txt", "w", 3)
    out = _write(tmp_path / "out.txt", "old", 1)
    with pytest.raises(typer.Exit):
        main(out, [wiki], weights=None, seed=0, overwrite=False)
    assert out.read_text(encoding="utf-8") == "old0\n"
    with pytest.raises(typer.BadParameter, match="no such file"):
        main(tmp_path / "x.txt", [tmp_path / "missing.txt"], weights=None, seed=0,
             overwrite=False)
