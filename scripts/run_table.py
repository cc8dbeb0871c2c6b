"""Train and evaluate every cell of a results table, resumable.

The logic: lab/spacy_elmo_lab/run_table.py; `--help` for the usage."""

import typer
from spacy_elmo_lab.run_table import main

if __name__ == "__main__":
    typer.run(main)
