"""`spacy-elmo widen`: a trained biLM with more LSTM cells, for `pretrain --init-weights`."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from wasabi import msg

from ..errors import ElmoError, Errors
from ..files.guard import STDOUT
from .common import OPTIONS_HELP, WEIGHTS_HELP, app, fail


@app.command("widen")
def widen_cli(
    output: Path = typer.Argument(..., help="Directory for the widened export"),
    lstm_dim: int = typer.Option(..., "--lstm-dim",
                                 help="LSTM cells a layer and direction (more than now)"),
    weights: Optional[str] = typer.Option(None, "--weights", help=(
        "The biLM to widen: " + WEIGHTS_HELP + " Default: the small biLM bundled for --lang.")),
    lang: str = typer.Option("en", "--lang", help=(
        "Language of the bundled biLM used without --weights: en or zh.")),
    options: Optional[Path] = typer.Option(None, "--options", help=OPTIONS_HELP),
    seed: int = typer.Option(0, "--seed", help="Draws the new cells' gate weights"),
    overwrite: bool = typer.Option(False, "--overwrite",
                                   help="Replace a model already in OUTPUT"),
) -> None:
    """Widen a trained biLM's LSTMs to --lstm-dim cells without changing what it computes
    (the new cells' projection rows are zero; checked on test sentences before writing).
    OUTPUT is an export (options.json + weights.hdf5, and the source's softmax.hdf5 and
    vocab.txt when it has them) that `spacy-elmo pretrain --init-weights OUTPUT` trains
    on: more capacity, starting from everything the biLM has learned."""
    from ..pretrain.widen import widen

    try:
        if str(output) == STDOUT:  # a model is a directory: it cannot stream
            raise ElmoError(Errors.E070.format(what="a widened biLM"))
        done = widen(weights, output, lstm_dim, options=options, seed=seed,
                     overwrite=overwrite, lang=lang)
    except ElmoError as err:
        fail(str(err))
    msg.good(f"Widened {done.old_dim} -> {done.lstm_dim} LSTM cells into {done.output}",
             f"largest output difference {done.max_diff:.2g} (float rounding); "
             + ("softmax and vocabulary carried over" if done.softmax else
                "no softmax beside the source: pretraining starts one from the char-CNN "
                "vectors"))
