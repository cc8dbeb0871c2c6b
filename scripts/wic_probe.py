"""Does a biLM tell word senses apart? The WiC (word-in-context) probe.

The logic: spacy_elmo/experiments/wic.py; `--help` for the usage."""

import typer

from spacy_elmo.experiments.wic import main

if __name__ == "__main__":
    typer.run(main)
