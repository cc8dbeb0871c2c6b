"""Every biLM that was ever bundled, out of the git history, as snapshots for the curve.

  python -m spacy_elmo_lab.bundled_history OUTPUT [--model spacy_elmo/data/elmo_en_small]

Each commit that changed MODEL/weights.hdf5 gives OUTPUT/step_<step>/ with that commit's
`options.json` and `weights.hdf5`, the model card (`README.md`) as it stood last with those
weights (a card corrected later counts), and a `dev.json` with the pretraining step, tokens
and dev perplexity that the card states (the `training in all` row of a biLM that continued
earlier weights, else its `training` row), and the commits: the
directory layout of `spacy-elmo pretrain --snapshot-every` snapshots, so that
`python -m spacy_elmo_lab.curve ... OUTPUT` trains one downstream run per bundled biLM. This is
how the perplexity-vs-F1 curve is made where a pretraining run's own snapshots are gone (they
are not committed; the bundled biLMs are). Needs a git checkout of the project (a clone, not
an installed package). A snapshot already extracted from the same commits is kept.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Dict, List, Optional, Set, Union

import typer
from wasabi import msg

from spacy_elmo.files.atomic import atomic_write
from spacy_elmo.files.json_io import read_json_object, write_json
from spacy_elmo.files.names import OPTIONS_NAME, SNAPSHOT_INFO, SNAPSHOT_PREFIX, WEIGHTS_NAME

# besides the model card, README.md
FILES = (OPTIONS_NAME, WEIGHTS_NAME)
# the model card's rows, as spacy_elmo_lab.bundle writes them (with or without thousands
# separators): "| training | 12,500 steps of 64 rows x 20 tokens, 16.0M tokens; ...",
# "| training in all | 210,000 steps, 268.8M tokens (...)" (a continued biLM) and
# "| dev perplexity | 136.6 at step 12500 (mean of ..." or "| dev perplexity | 298.0 (mean ..."
STEPS = re.compile(r"^\| training \| ([\d,]+) steps\b.*?([\d.]+)M (?:tokens|characters)",
                   re.MULTILINE)
TOTAL = re.compile(r"^\| training in all \| ([\d,]+) steps\b.*?([\d.]+)M "
                   r"(?:tokens|characters)", re.MULTILINE)
PERPLEXITY = re.compile(r"^\| dev perplexity \| ([\d.]+)\b", re.MULTILINE)


def git(*args: str, cwd: Path) -> bytes:
    """Standard output of a git command in `cwd`; a clear error outside a git checkout."""
    try:
        return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True).stdout
    except FileNotFoundError as err:
        raise typer.BadParameter("git is not installed: this script reads the git "
                                 "history") from err
    except subprocess.CalledProcessError as err:
        raise typer.BadParameter(f"git {' '.join(args)} failed in {cwd}: "
                                 f"{err.stderr.decode(errors='replace').strip()} (run it in a "
                                 "git clone of spacy-elmo, not in an installed package)") from err


def card_figures(card: str) -> Dict[str, Union[int, float]]:
    """Step, tokens (millions) and dev perplexity that a bundled model card states."""
    steps, ppl = TOTAL.search(card) or STEPS.search(card), PERPLEXITY.search(card)
    if steps is None or ppl is None:
        raise ValueError("the card has no '| training | N steps ... M tokens' or no "
                         "'| dev perplexity | P' row")
    return {"step": int(steps.group(1).replace(",", "")),
            "tokens_millions": float(steps.group(2)), "dev_ppl": float(ppl.group(1))}


def commits(model: str, repo: Path) -> List[str]:
    """The commits that changed MODEL/weights.hdf5, oldest first."""
    out = git("log", "--format=%H", "--reverse", "--", f"{model}/{WEIGHTS_NAME}", cwd=repo)
    return out.decode().split()


def last_card(model: str, commit: str, until: Optional[str], repo: Path) -> str:
    """The last commit from `commit` up to (not including) `until`, the next change of the
    weights (None: HEAD), that changed MODEL/README.md; `commit` if none did."""
    span = f"{commit}..{until}~1" if until else f"{commit}..HEAD"
    later = git("log", "-1", "--format=%H", span, "--", f"{model}/README.md", cwd=repo)
    return later.decode().strip() or commit


def main(output: Path, model: str = typer.Option(
        "spacy_elmo/data/elmo_en_small", help="the bundled model's directory in the repo"),
         repo: Path = typer.Option(Path("."), help="the git checkout")) -> None:
    found = commits(model, repo)
    if not found:
        raise typer.BadParameter(f"no commit in {repo} changed {model}/weights.hdf5: is "
                                 "--model a bundled model's directory?")
    made = set()
    for commit, until in zip(found, [*found[1:], None], strict=True):
        card_commit = last_card(model, commit, until, repo)
        card = git("show", f"{card_commit}:{model}/README.md", cwd=repo)
        try:
            info = card_figures(card.decode())
        except ValueError as err:
            msg.warn(f"{commit[:7]}: skipped, {err}")
            continue
        target = output / f"{SNAPSHOT_PREFIX}{info['step']}"
        made.add(target.name)
        dev = target / SNAPSHOT_INFO
        if dev.exists() and {k: read_json_object(dev, "a snapshot's dev.json").get(k)
                             for k in ("commit", "card_commit")} == {
                                 "commit": commit, "card_commit": card_commit}:
            msg.info(f"{target}: kept (commit {commit[:7]})")
            continue
        files = {name: git("show", f"{commit}:{model}/{name}", cwd=repo) for name in FILES}
        for name, data in {**files, "README.md": card}.items():
            with atomic_write(target / name) as tmp:
                tmp.write_bytes(data)
        # last: marks the snapshot complete
        write_json(dev, {**info, "commit": commit, "card_commit": card_commit})
        msg.good(f"{target}: commit {commit[:7]}, step {info['step']}, "
                 f"{info['tokens_millions']}M tokens, dev perplexity {info['dev_ppl']}")
    remove_stale(output, made, set(found))


def remove_stale(output: Path, made: Set[str], found: Set[str]) -> None:
    """Remove the snapshots this script extracted before under a name it no longer gives
    them (a card corrected since), so that the curve does not plot a biLM twice."""
    for dev in sorted(output.glob(f"{SNAPSHOT_PREFIX}*/{SNAPSHOT_INFO}")):
        if dev.parent.name not in made and read_json_object(
                dev, "a snapshot's dev.json").get("commit") in found:
            shutil.rmtree(dev.parent)
            msg.info(f"{dev.parent}: removed (its card now names another step)")


if __name__ == "__main__":
    typer.run(main)
