"""Downstream score against biLM perplexity: one ELMo training per biLM snapshot.

The logic: lab/spacy_elmo_lab/curve.py; `--help` for the usage."""

import typer
from spacy_elmo_lab.curve import main

if __name__ == "__main__":
    typer.run(main)
