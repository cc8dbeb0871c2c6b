"""Split a text corpus into train and dev files: every N-th line goes to dev.

The logic: spacy_elmo/experiments/holdout.py; `--help` for the usage."""

import typer

from spacy_elmo.experiments.holdout import main
from spacy_elmo.experiments.messages import one_line_errors

if __name__ == "__main__":
    typer.run(one_line_errors(main))
