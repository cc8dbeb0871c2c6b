"""spacy_elmo_lab.bundled_history: the bundled biLMs of the git history as curve snapshots."""

import json
import shutil
import subprocess

import pytest
import typer
from spacy_elmo_lab import bundled_history, curve

MODEL = "pkg/data/model"
OLD_CARD = ("| training | 3461 steps of 64 rows x 20 tokens, 4.4M tokens; adagrad |\n"
            "| dev perplexity | 298.0 (mean of forward 298.7 and backward 297.2) |\n")
NEW_CARD = ("| training | 12,500 steps of 64 rows x 20 tokens, 16.0M tokens (a snapshot) |\n"
            "| time and hardware | 2.62 h |\n"
            "| dev perplexity | 136.6 at step 12500 (mean of forward 137.6 and backward |\n")

needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def commit(repo, card, weights, message):
    model = repo / MODEL
    model.mkdir(parents=True, exist_ok=True)
    (model / "README.md").write_text(card, encoding="utf-8")
    (model / "options.json").write_text(json.dumps({"n": len(weights)}))
    (model / "weights.hdf5").write_bytes(weights)
    env = ["-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    subprocess.run(["git", *env, "commit", "-q", "-m", message], cwd=repo, check=True)


def test_card_figures_read_both_card_formats():
    assert bundled_history.card_figures(OLD_CARD) == {"step": 3461, "tokens_millions": 4.4,
                                              "dev_ppl": 298.0}
    assert bundled_history.card_figures(NEW_CARD) == {"step": 12500, "tokens_millions": 16.0,
                                              "dev_ppl": 136.6}
    with pytest.raises(ValueError, match="dev perplexity"):
        bundled_history.card_figures("| training | 10 steps, 0.1M tokens |\n")


@needs_git
def test_each_bundled_version_becomes_a_snapshot(tmp_path, monkeypatch):
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    commit(repo, OLD_CARD, b"first", "first biLM")
    commit(repo, "no figures here\n", b"second", "a card without figures")
    (repo / "other.txt").write_text("unrelated")
    commit(repo, NEW_CARD, b"third", "third biLM")
    out = tmp_path / "history"
    bundled_history.main(out, model=MODEL, repo=repo)
    assert sorted(p.name for p in out.iterdir()) == ["step_12500", "step_3461"]
    assert (out / "step_3461" / "weights.hdf5").read_bytes() == b"first"
    assert (out / "step_12500" / "weights.hdf5").read_bytes() == b"third"
    assert (out / "step_12500" / "README.md").read_text() == NEW_CARD
    dev = json.loads((out / "step_12500" / "dev.json").read_text())
    assert dev["step"] == 12500 and dev["dev_ppl"] == 136.6 and len(dev["commit"]) == 40
    # the layout curve.py reads: a directory of step_*/dev.json snapshots
    assert sorted(curve._expand([str(out)])) == [str(out / "step_12500"),
                                                 str(out / "step_3461")]


@needs_git
def test_outside_a_git_checkout_is_a_clear_error(tmp_path):
    with pytest.raises(typer.BadParameter, match="git clone"):
        bundled_history.main(tmp_path / "out", model=MODEL, repo=tmp_path)


CONTINUED_CARD = ("| earlier training | two legs |\n"
                  "| training | 1,180 steps of 64 rows x 20 characters, 1.5M characters |\n"
                  "| training in all | 210,000 steps, 268.8M characters (the earlier ...) |\n"
                  "| dev perplexity | 72.3 at step 1180 (mean of forward 71.8 |\n")


def test_card_figures_take_the_whole_training_of_a_continued_biLM():
    assert bundled_history.card_figures(CONTINUED_CARD) == {
        "step": 210000, "tokens_millions": 268.8, "dev_ppl": 72.3}


@needs_git
def test_a_card_corrected_later_names_the_snapshot(tmp_path):
    """The card committed with the weights gave only the last leg's steps; a later commit
    added the whole: the snapshot takes the corrected card, and the one extracted under
    the old name goes."""
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    commit(repo, OLD_CARD, b"first", "first biLM")
    leg_only = "\n".join(line for line in CONTINUED_CARD.splitlines()
                         if "in all" not in line) + "\n"
    commit(repo, leg_only, b"second", "continued biLM")
    out = tmp_path / "history"
    bundled_history.main(out, model=MODEL, repo=repo)
    assert sorted(p.name for p in out.iterdir()) == ["step_1180", "step_3461"]
    commit(repo, CONTINUED_CARD, b"second", "card: the whole training")
    bundled_history.main(out, model=MODEL, repo=repo)
    assert sorted(p.name for p in out.iterdir()) == ["step_210000", "step_3461"]
    assert (out / "step_210000" / "weights.hdf5").read_bytes() == b"second"
    assert (out / "step_210000" / "README.md").read_text() == CONTINUED_CARD
    # the first biLM's card, changed only with the next weights, stays its own
    assert (out / "step_3461" / "README.md").read_text() == OLD_CARD
