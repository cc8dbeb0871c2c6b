"""Raw text as JSONL for `spacy pretrain`: one {"text": ...} object per line.

The logic: lab/spacy_elmo_lab/raw_text.py; `--help` for the usage."""

import typer
from spacy_elmo_lab.messages import one_line_errors
from spacy_elmo_lab.raw_text import main

if __name__ == "__main__":
    typer.run(one_line_errors(main))
