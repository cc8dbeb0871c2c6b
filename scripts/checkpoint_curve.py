"""Downstream score against biLM perplexity: one ELMo training per biLM snapshot.

The logic: spacy_elmo/experiments/curve.py; `--help` for the usage."""

import typer

from spacy_elmo.experiments.curve import main

if __name__ == "__main__":
    typer.run(main)
