"""Every biLM that was ever bundled, out of the git history, as snapshots for the curve.

The logic: lab/spacy_elmo_lab/bundled_history.py; `--help` for the usage."""

import typer
from spacy_elmo_lab.bundled_history import main

if __name__ == "__main__":
    typer.run(main)
