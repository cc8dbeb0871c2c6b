"""The results table and the layer-mix figure from the metrics of the table's runs.

The logic: spacy_elmo/experiments/results.py; `--help` for the usage."""

import typer

from spacy_elmo.experiments.results import main

if __name__ == "__main__":
    typer.run(main)
