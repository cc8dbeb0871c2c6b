"""`spacy-elmo info`: what a weights file holds (options, parameters, output layers)."""

from __future__ import annotations

from pathlib import Path
from typing import Dict, Optional, Tuple

import typer
from wasabi import msg

from ..bilm.options import BiLMOptions
from ..bilm.weights import read_hdf5, resolve_paths
from ..errors import ElmoError
from . import app, fail

PARTS = (("char embedding", "char_embed"), ("char CNN", "CNN/"), ("highway", "CNN_high_"),
         ("projection", "CNN_proj/"), ("LSTM forward", "RNN_0/"), ("LSTM backward", "RNN_1/"))


@app.command("info")
def info_cli(
    weights: Path = typer.Argument(..., metavar="WEIGHTS_OR_DIR", help=(
        "weights.hdf5, or a directory with weights.hdf5 and options.json.")),
    options: Optional[Path] = typer.Option(None, "--options", help=(
        "options.json (default: the one beside the weights).")),
) -> None:
    """Show a biLM's options, parameter counts per part, and its output layers."""
    try:
        opts, counts, paths = describe(weights, options)
    except ElmoError as err:
        fail(str(err))
    msg.divider("Files")
    msg.table([("options", str(paths[0])), ("weights", str(paths[1]))])
    msg.divider("Options")
    msg.table([(key, str(value)) for key, value in opts.as_dict().items() if key != "extra"])
    msg.divider("Parameters")
    msg.table([(part, f"{n:,}") for part, n in counts.items()], aligns=("l", "r"))
    msg.divider("Output")
    msg.text(f"{opts.n_output_layers} layers (token layer + {opts.n_layers} LSTM layers), "
             f"each {opts.output_dim} wide")


def describe(weights: Path, options: Optional[Path] = None
             ) -> Tuple[BiLMOptions, Dict[str, int], Tuple[Path, Path]]:
    """Options, parameter counts per part (and 'total'), and the resolved file paths.

    Every dataset is read and checked against the options, so a broken file fails here.
    """
    options_path, weights_path = resolve_paths(weights, options)
    opts = BiLMOptions.from_file(options_path)
    arrays = read_hdf5(weights_path, opts)
    counts = {part: sum(a.size for name, a in arrays.items() if name.startswith(prefix))
              for part, prefix in PARTS}
    counts["total"] = sum(a.size for a in arrays.values())
    return opts, counts, (options_path, weights_path)
