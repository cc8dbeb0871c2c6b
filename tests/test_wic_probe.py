"""spacy_elmo_lab.wic: reading the WiC layout, the threshold fit, and a whole probe run."""

import json
from pathlib import Path

import numpy as np
import pytest
import typer
from spacy_elmo_lab import curve, similarity_demo, wic


def write_wic(root, split, rows):
    (root / split).mkdir(parents=True, exist_ok=True)
    data = "\n".join("\t".join([w, "N", f"{i}-{j}", a, b]) for w, i, j, a, b, _ in rows)
    (root / split / f"{split}.data.txt").write_text(data + "\n", encoding="utf-8")
    gold = "\n".join("T" if same else "F" for *_, same in rows)
    (root / split / f"{split}.gold.txt").write_text(gold + "\n", encoding="utf-8")


ROWS = [
    ("bank", 1, 4, "the bank raised rates", "we sat by the bank", False),
    ("bank", 1, 1, "the bank raised rates", "the bank cut rates", True),
    ("run", 0, 2, "run the company", "they will run fast", False),
    ("run", 0, 0, "run a shop", "run the company", True),
]


def test_fit_threshold_finds_the_best_cut():
    scores = np.array([0.1, 0.2, 0.6, 0.7, 0.4])
    same = np.array([False, False, True, True, False])
    threshold, accuracy = wic.fit_threshold(scores, same)
    assert accuracy == 1.0 and 0.4 < threshold < 0.6
    # all the same score: the best is the majority side
    threshold, accuracy = wic.fit_threshold(np.zeros(3), np.array([True, True, False]))
    assert accuracy == pytest.approx(2 / 3) and threshold < 0


def test_read_wic_and_its_errors(tmp_path):
    write_wic(tmp_path, "train", ROWS)
    pairs = wic.read_wic(tmp_path, "train")
    assert [p.same for p in pairs] == [False, True, False, True]
    assert pairs[0].tokens[1][pairs[0].index[1]] == "bank"
    with pytest.raises(typer.BadParameter, match="dev"):
        wic.read_wic(tmp_path, "dev")
    bad = [("bank", 9, 0, "the bank", "a bank", True)]
    write_wic(tmp_path / "bad", "train", bad)
    with pytest.raises(typer.BadParameter, match="out of the sentence"):
        wic.read_wic(tmp_path / "bad", "train")


def test_probe_runs_end_to_end(tmp_path, tiny_weights_dir):
    write_wic(tmp_path / "wic", "train", ROWS)
    write_wic(tmp_path / "wic", "dev", ROWS[:2])
    out, rows_json = tmp_path / "wic.md", tmp_path / "wic.json"
    wic.main(tiny_weights_dir, tmp_path / "wic", out=out, json_out=rows_json, batch_size=3,
             threads=1)
    rows = json.loads(rows_json.read_text())
    assert [r["layer"] for r in rows] == ["0", "1", "2", "mean"]
    for r in rows:
        assert 0 <= r["dev"] <= 100 and r["train"] >= 50  # the fit is at least the majority
    # the top layer's row, recomputed from the vectors: threshold fitted on train, applied to dev
    from spacy_elmo.bilm import load_bilm

    bilm = load_bilm(tiny_weights_dir)
    scores = {split: wic.cosines(wic.target_vectors(bilm, wic.read_wic(tmp_path / "wic", split), 3))
              for split in ("train", "dev")}
    same = {split: np.array([p.same for p in wic.read_wic(tmp_path / "wic", split)])
            for split in ("train", "dev")}
    threshold, train_acc = wic.fit_threshold(scores["train"][:, 2], same["train"])
    dev_acc = float(((scores["dev"][:, 2] >= threshold) == same["dev"]).mean())
    assert rows[2]["threshold"] == pytest.approx(threshold, abs=1e-6)
    assert (rows[2]["train"], rows[2]["dev"]) == pytest.approx((100 * train_acc, 100 * dev_acc))
    assert "| mean |" in out.read_text()


def test_curve_adds_each_biLMs_wic_dev_accuracy_and_keeps_it(tmp_path, tiny_weights_dir):
    write_wic(tmp_path / "wic", "train", ROWS)
    write_wic(tmp_path / "wic", "dev", ROWS[:2])
    cache = tmp_path / "wic.json"
    accuracy = curve.wic_dev(tiny_weights_dir, tmp_path / "wic", cache)
    rows = json.loads(cache.read_text())
    chosen = max(rows, key=lambda r: r["train"])
    assert accuracy == chosen["dev"] and accuracy in (0.0, 50.0, 100.0)
    # a rerun reads the kept figures: the biLM is not loaded again
    assert curve.wic_dev(tmp_path / "gone", tmp_path / "wic", cache) == accuracy


def test_curve_takes_every_nth_snapshot_of_a_directory(tmp_path):
    for step in (2500, 5000, 7500, 10000):
        snap = tmp_path / "snapshots" / f"step_{step:07d}"
        snap.mkdir(parents=True)
        (snap / "dev.json").write_text(json.dumps({"step": step, "dev_ppl": 100.0}))
    snaps = str(tmp_path / "snapshots")
    every = [Path(p).name for p in curve._expand([snaps, "other=90"], every=5000)]
    assert every == ["step_0005000", "step_0010000", "other=90"]
    assert len(curve._expand([snaps])) == 4


def test_similarity_demo_says_whether_the_senses_separate(tiny_weights_dir, capsys):
    senses = ["money", "money", "river", "river"]
    same_far = [np.array([1.0, 0.0]), np.array([0.6, 0.8]),  # money: cosine 0.6
                np.array([0.0, 1.0]), np.array([0.0, 1.0])]  # river: 1.0
    assert similarity_demo.separation(same_far, senses) == (pytest.approx(0.6), pytest.approx(0.8))
    apart = [np.array([1.0, 0.0]), np.array([1.0, 0.1]), np.array([0.0, 1.0]),
             np.array([0.1, 1.0])]
    same_min, other_max = similarity_demo.separation(apart, senses)
    assert same_min > other_max
    for lang, words in (("en", ["'bank'"]), ("zh", ["'行'", "'苹果'"])):
        similarity_demo.main(tiny_weights_dir, lang=lang)
        out = capsys.readouterr().out
        assert all(f"cosine similarity of {word}" in out for word in words)
        assert out.count("every same-sense pair closer than every other-sense pair?") == len(words)
        assert out.count(": yes (") + out.count(": no (") == 4 * len(words)  # mix, 3 layers
        # a random biLM separates nothing: one line says why and what to load instead
        lines = [line for line in out.splitlines() if line.startswith("A 'no' above")]
        assert len(lines) == 1 and "does not separate these senses" in lines[0]
        assert "pretrained on CPUs" not in lines[0]  # weights given: not the bundled biLM


def test_similarity_demo_names_the_bundled_biLM_and_a_published_one():
    line = similarity_demo.why_not_separated(True, "en")
    assert "small bundled biLM" in line and "allennlp/original" in line
    assert "ELMoForManyLangs" in similarity_demo.why_not_separated(True, "zh")


def test_similarity_demo_finds_a_word_of_several_tokens():
    find = similarity_demo.find_word
    assert find(["他", "在", "苹", "果", "做"], "苹果") == (2, 4)
    assert find(["I", "bank", "."], "bank") == (1, 2)
    assert find(["苹", "苹", "果"], "苹果") == (1, 3)
    assert find(["苹", "果汁"], "苹果") is None


def _run(main, args):
    from typer.testing import CliRunner

    app = typer.Typer(add_completion=False)
    app.command()(main)
    result = CliRunner().invoke(app, [str(a) for a in args])
    return result.exit_code, result.output


def test_missing_weights_are_one_line_not_a_traceback(tmp_path):
    """Issue 31: wic_probe and similarity_demo printed a 150-line traceback ending in E001."""
    write_wic(tmp_path / "wic", "train", ROWS)
    write_wic(tmp_path / "wic", "dev", ROWS[:2])
    for main, args in ((wic.main, [tmp_path / "gone", tmp_path / "wic"]),
                       (similarity_demo.main, [tmp_path / "gone"])):
        code, output = _run(main, args)
        assert code == 1 and "[E001]" in output and "gone" in output, output
        assert "Traceback" not in output and len(output.strip().splitlines()) <= 3


@pytest.mark.parametrize("flag", ["--threads", "--batch-size"])
def test_wic_probe_refuses_a_count_below_one(tmp_path, tiny_weights_dir, flag):
    """`wic_probe --threads 0` died with torch's RuntimeError."""
    write_wic(tmp_path / "wic", "train", ROWS)
    write_wic(tmp_path / "wic", "dev", ROWS[:2])
    code, output = _run(wic.main, [tiny_weights_dir, tmp_path / "wic", flag, "0"])
    assert code == 1 and "[E020]" in output and flag in output and "positive" in output
    assert "RuntimeError" not in output


def test_similarity_previews_end_at_a_word_boundary():
    """The quickstart demo cut its previews mid-word ("...at the ban")."""
    text = "I deposited the money at the bank on Monday ."
    assert similarity_demo.preview(text) == "I deposited the money at the..."
    assert similarity_demo.preview("The bank raised rates .") == "The bank raised rates ."
    assert similarity_demo.preview("我在银行存了一笔钱。" * 5, width=8) == "我在银行存了一笔..."
    for _, sentence in similarity_demo.DEMOS["en"][0][1]:
        shown = similarity_demo.preview(sentence)
        assert shown == sentence or sentence.startswith(shown[:-3] + " ")
    # around the demo's word, so that the compared word is seen
    assert similarity_demo.preview(text, word="bank") == "...money at the bank on Monday ."
    chinese = similarity_demo.preview("我在银行存了一笔钱。" * 5, width=8, word="钱")
    assert chinese == "...存了一笔钱。我在..."
    for lang, demos in similarity_demo.DEMOS.items():
        for word, sentences in demos:
            for _, sentence in sentences:
                assert word in similarity_demo.preview(sentence, word=word), (lang, sentence)
