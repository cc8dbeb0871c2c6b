"""Do the biLM's layers tell word senses apart? Nearest-neighbour WSD per layer.

The logic: lab/spacy_elmo_lab/probe_wsd.py; `--help` for the usage."""

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before torch starts its thread pool

import typer  # noqa: E402
from spacy_elmo_lab.probe_wsd import main  # noqa: E402

if __name__ == "__main__":
    typer.run(main)
