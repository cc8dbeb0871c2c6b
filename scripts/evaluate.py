"""Evaluate every trained pipeline on the dev and test splits of its dataset.

The logic: lab/spacy_elmo_lab/evaluate.py; `--help` for the usage."""

import typer
from spacy_elmo_lab.evaluate import main

if __name__ == "__main__":
    typer.run(main)
