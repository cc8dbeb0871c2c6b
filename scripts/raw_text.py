"""Raw text as JSONL for `spacy pretrain`: one {"text": ...} object per line.

The logic: spacy_elmo/experiments/raw_text.py; `--help` for the usage."""

import typer

from spacy_elmo.experiments.messages import one_line_errors
from spacy_elmo.experiments.raw_text import main

if __name__ == "__main__":
    typer.run(one_line_errors(main))
