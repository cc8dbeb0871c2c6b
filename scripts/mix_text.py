"""Mix text corpora into one file, each at a weight, their lines spread evenly through it.

The logic: lab/spacy_elmo_lab/mix_text.py; `--help` for the usage."""

import typer
from spacy_elmo_lab.messages import one_line_errors
from spacy_elmo_lab.mix_text import main

if __name__ == "__main__":
    typer.run(one_line_errors(main))
