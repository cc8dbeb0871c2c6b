"""Split a text corpus into train and dev files: every N-th line goes to dev.

The logic: lab/spacy_elmo_lab/holdout.py; `--help` for the usage."""

import typer
from spacy_elmo_lab.holdout import main
from spacy_elmo_lab.messages import one_line_errors

if __name__ == "__main__":
    typer.run(one_line_errors(main))
