"""Export a pretraining run as the package's bundled biLM for a language, with its model card.

The logic: lab/spacy_elmo_lab/bundle.py; `--help` for the usage."""

import typer
from spacy_elmo_lab.bundle import main

if __name__ == "__main__":
    typer.run(main)
