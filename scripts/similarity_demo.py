"""The same word in different senses: ELMo vectors tell them apart, the token layer cannot.

The logic: lab/spacy_elmo_lab/similarity_demo.py; `--help` for the usage."""

import typer
from spacy_elmo_lab.similarity_demo import main

if __name__ == "__main__":
    typer.run(main)
