"""What the layer probes (`probe_wsd.py`, `probe_pos.py`) share: the layers they score, the
biLM they load, its vectors for tokenized sentences, and their per-layer table."""

from __future__ import annotations

from pathlib import Path
from typing import Dict, List, Optional, Sequence

import numpy as np
import torch
import typer

from spacy_elmo.bilm import BiLM, load_bilm
from spacy_elmo.bilm.embedder import Embedder
from spacy_elmo.bilm.hardware import cpu_model
from spacy_elmo.errors import ElmoError, Errors
from spacy_elmo.files.guard import guard_output
from spacy_elmo.validation import check_all, integer

# the options both probes' commands take
WEIGHTS_OPTION = typer.Option(
    None, "--weights", help="The biLM: a directory (an export, a run's snapshot), a "
    "weights.hdf5, a published name or URL; default: the bundled English biLM")
OUTPUT_OPTION = typer.Option(None, "--output", help="Write the results as JSON here")
BATCH_SIZE_OPTION = typer.Option(64, "--batch-size")
THREADS_OPTION = typer.Option(2, "--threads")
OVERWRITE_OPTION = typer.Option(False, "--overwrite", help="Replace an existing --output")

MIX = "mix"  # the `elmo` component's default doc._.elmo: the equal-weight mean of the layers
# where the probes' data lie in a data directory (the project's ${vars.data_dir})
DATA_LAYOUT = {"semcor": "wsd/semcor30.jsonl.xz", "wsd_dev": "wsd/semeval2007",
               "wsd_test": "wsd/senseval2", "ud": "ud_en_ewt"}


def layer_names(n_layers: int) -> List[str]:
    """"0" (the token layer), "1".. (one per LSTM layer), then "mix"."""
    return [str(k) for k in range(n_layers)] + [MIX]


def layer_label(name: str) -> str:
    if name == MIX:
        return "mix (mean)"
    return "token layer" if name == "0" else f"LSTM {name}"


def with_mix(layers: np.ndarray, axis: int) -> np.ndarray:
    """`layers` with their mean appended along `axis` (the layer axis)."""
    return np.concatenate([layers, layers.mean(axis=axis, keepdims=True)], axis=axis)


def probe_data(data_dir: Path, parts: Sequence[str]) -> Dict[str, Path]:
    """The paths of `parts` (keys of DATA_LAYOUT) in a data directory; E001 for one that is
    not there."""
    paths = {part: data_dir / DATA_LAYOUT[part] for part in parts}
    for path in paths.values():
        if not path.exists():
            raise ElmoError(Errors.E001.format(path=path, cwd=Path.cwd()))
    return paths


def best_layer(values: Dict[str, float]) -> str:
    """'54.7 (layer 2)': the best of a probe's per-layer figures, and its layer."""
    name = max(values, key=lambda k: values[k])
    return f"{values[name]:.1f} (layer {name})"


def embedder(bilm: BiLM, batch_size: int) -> Embedder:
    """Every layer of tokenized sentences, in order (the batched, length-sorted path of
    `spacy-elmo embed`): `.embed(sentences)` yields each one's (L+1, n_tokens, width)."""
    return Embedder(bilm, batch_size=batch_size, layers="all")


def start(weights: Optional[str], output: Optional[Path], inputs: Sequence[Path],
          batch_size: int, threads: int, overwrite: bool) -> BiLM:
    """The checks a probe's command makes before any work (settings, then the output guard:
    E025/E026), then its torch threads and its biLM (None: the bundled English one)."""
    check_all({"--batch-size": batch_size, "--threads": threads},
              {"--batch-size": integer(1), "--threads": integer(1)})
    if output is not None:
        local = [Path(weights)] if weights is not None and Path(weights).exists() else []
        guard_output(output, inputs=[*inputs, *local], overwrite=overwrite, what="--output")
    torch.set_num_threads(threads)
    return load_bilm(weights)


def header(what: str, weights: Optional[str], seconds: float, threads: int) -> str:
    source = weights if weights is not None else "the bundled English biLM"
    return (f"{what} of `{source}`: {seconds:.0f} s on {threads} thread(s) of "
            f"{cpu_model()}")

