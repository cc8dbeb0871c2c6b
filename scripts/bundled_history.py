"""Every biLM that was ever bundled, out of the git history, as snapshots for the curve.

The logic: spacy_elmo/experiments/history.py; `--help` for the usage."""

import typer

from spacy_elmo.experiments.history import main

if __name__ == "__main__":
    typer.run(main)
