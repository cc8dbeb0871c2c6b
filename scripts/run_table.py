"""Train and evaluate every cell of a results table, resumable.

The logic: lab/spacy_elmo_lab/runner.py; `--help` for the usage."""

import typer
from spacy_elmo_lab.runner import main

if __name__ == "__main__":
    typer.run(main)
