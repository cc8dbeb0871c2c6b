"""`spacy-elmo export`: a pretraining checkpoint as a biLM that the component loads."""

from __future__ import annotations

from pathlib import Path

import typer
from wasabi import msg

from ..errors import ElmoError, Errors
from ..files.guard import STDOUT
from .common import app, fail


@app.command("export")
def export_cli(
    checkpoint: Path = typer.Argument(..., help="A run directory or its checkpoint.pt"),
    output: Path = typer.Argument(..., help="Directory for options.json + weights.hdf5"),
    overwrite: bool = typer.Option(False, "--overwrite",
                                   help="Replace a model already in OUTPUT"),
) -> None:
    """Export a pretraining checkpoint: options.json + weights.hdf5 (bilm-tf layout),
    vocab.txt, and the softmax in softmax.hdf5. OUTPUT is written whole: a model there is
    kept until the new one is complete; other files in OUTPUT are refused."""
    from ..pretrain.export import export

    try:
        if str(output) == STDOUT:  # a model is a directory: it cannot stream
            raise ElmoError(Errors.E070.format(what="an export"))
        paths = export(checkpoint, output, overwrite=overwrite)
    except ElmoError as err:
        fail(str(err))
    msg.good(f"Exported to {output}", "\n".join(str(p) for p in paths.values()))
