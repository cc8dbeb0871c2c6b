"""The `spacy-elmo` console command (also `python -m spacy_elmo`)."""

from __future__ import annotations

import os

# torch's OpenMP threads spin while waiting by default; on shared or busy machines each small
# op then waits for a descheduled thread (measured here: 45.9 s vs 3.3 s for one embed run).
# Must be set before torch starts; a value the user set wins.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from typing import NoReturn  # noqa: E402

import typer  # noqa: E402
from wasabi import Printer  # noqa: E402

app = typer.Typer(name="spacy-elmo", no_args_is_help=True, add_completion=False,
                  help="ELMo for spaCy: embed text, inspect, pretrain and export biLMs.")
_stderr = Printer(no_print=True)
WEIGHTS_HELP = ("weights.hdf5, a directory with weights.hdf5 and options.json, an "
                "ELMoForManyLangs model directory, an http(s):// or file:// URL, or a published "
                "biLM: allennlp/small, allennlp/medium, allennlp/original, "
                "allennlp/original-5.5B (downloaded once into the cache).")
OPTIONS_HELP = ("options.json (default: the one beside the weights); for an ELMoForManyLangs "
                "model, its network config when the model directory lacks it.")
FORMAT_HELP = "auto (detected), allennlp or efml."


def main() -> None:
    app()


def fail(text: str, code: int = 1) -> NoReturn:
    """Print an error to stderr and exit with `code`."""
    typer.echo(_stderr.fail(text), err=True)
    raise typer.Exit(code)


def warn(text: str) -> None:
    """Print a warning to stderr."""
    typer.echo(_stderr.warn(text), err=True)


# Each module registers its commands on `app`.
from . import embed, info, pretrain, pretrain_cmd  # noqa: E402,F401
