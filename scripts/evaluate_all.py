"""Evaluate every trained pipeline on the dev and test splits of its dataset.

The logic: spacy_elmo/experiments/evaluate.py; `--help` for the usage."""

import typer

from spacy_elmo.experiments.evaluate import main

if __name__ == "__main__":
    typer.run(main)
