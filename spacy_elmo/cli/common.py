"""What the `spacy-elmo` commands share: the typer app they register on, error output, and
help texts. Warnings are `errors.warn`'s, as everywhere in the package."""

from __future__ import annotations

from typing import NoReturn

import typer
from wasabi import Printer

app = typer.Typer(name="spacy-elmo", no_args_is_help=True, add_completion=False,
                  # click's plain help: no markup language reads the texts (rich markup ate
                  # `[serve]`, markdown `<S>`), and paragraphs are re-flowed to the terminal
                  rich_markup_mode=None,
                  help="ELMo for spaCy: embed text, inspect, pretrain and export biLMs.")
_stderr = Printer(no_print=True)
WEIGHTS_HELP = ("weights.hdf5, a directory with weights.hdf5 and options.json, an "
                "ELMoForManyLangs model directory, an http(s):// or file:// URL, or a published "
                "biLM: allennlp/small, allennlp/medium, allennlp/original, "
                "allennlp/original-5.5B (downloaded once into the cache).")
OPTIONS_HELP = ("options.json (default: the one beside the weights); for an ELMoForManyLangs "
                "model, its network config when the model directory lacks it.")
FORMAT_HELP = "auto (detected), allennlp or efml."


def fail(text: str, code: int = 1) -> NoReturn:
    """Print an error to stderr and exit with `code`."""
    typer.echo(_stderr.fail(text), err=True)
    raise typer.Exit(code)

