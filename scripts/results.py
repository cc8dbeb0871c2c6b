"""The results table and the layer-mix figure from the metrics of the table's runs.

The logic: lab/spacy_elmo_lab/results.py; `--help` for the usage."""

import typer
from spacy_elmo_lab.results import main

if __name__ == "__main__":
    typer.run(main)
