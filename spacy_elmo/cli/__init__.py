"""The `spacy-elmo` console command (also `python -m spacy_elmo`)."""

from __future__ import annotations

import os

# torch's OpenMP threads spin while waiting by default; on shared or busy machines each small
# op then waits for a descheduled thread (measured here: 45.9 s vs 3.3 s for one embed run).
# Must be set before torch starts; a value the user set wins.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import typer  # noqa: E402

app = typer.Typer(name="spacy-elmo", no_args_is_help=True, add_completion=False,
                  help="ELMo for spaCy: embed text, inspect, pretrain and export biLMs.")


def main() -> None:
    app()


# Each module registers its commands on `app`.
from . import embed, info, pretrain  # noqa: E402,F401
