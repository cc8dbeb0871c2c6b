"""The `spacy-elmo` console command (also `python -m spacy_elmo`)."""

from __future__ import annotations

import typer

app = typer.Typer(name="spacy-elmo", no_args_is_help=True, add_completion=False,
                  help="ELMo for spaCy: embed text, inspect, pretrain and export biLMs.")


def main() -> None:
    app()


# Each module registers its commands on `app`.
from . import embed, info, pretrain  # noqa: E402,F401
