"""Does a biLM tell word senses apart? The WiC (word-in-context) probe.

The logic: lab/spacy_elmo_lab/wic.py; `--help` for the usage."""

import typer
from spacy_elmo_lab.wic import main

if __name__ == "__main__":
    typer.run(main)
