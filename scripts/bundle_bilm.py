"""Export a pretraining run as the package's bundled biLM for a language, with its model card.

The logic: spacy_elmo/experiments/bundle.py; `--help` for the usage."""

import typer

from spacy_elmo.experiments.bundle import main

if __name__ == "__main__":
    typer.run(main)
