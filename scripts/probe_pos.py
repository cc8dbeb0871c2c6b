"""Which biLM layers carry syntax? A linear part-of-speech classifier per layer.

The logic: lab/spacy_elmo_lab/probe_pos.py; `--help` for the usage."""

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before torch starts its thread pool

import typer  # noqa: E402
from spacy_elmo_lab.probe_pos import main  # noqa: E402

if __name__ == "__main__":
    typer.run(main)
