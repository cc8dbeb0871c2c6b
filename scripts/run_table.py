"""Train and evaluate every cell of a results table, resumable.

The logic: spacy_elmo/experiments/runner.py; `--help` for the usage."""

import typer

from spacy_elmo.experiments.runner import main

if __name__ == "__main__":
    typer.run(main)
