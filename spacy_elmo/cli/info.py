"""`spacy-elmo info`: what a biLM holds (options, parameters, output layers)."""

from __future__ import annotations

from pathlib import Path
from typing import Dict, List, Optional, Tuple

import typer
from wasabi import msg

from ..bilm.efml import CHAR_DIC, ENCODER, TOKEN_EMBEDDER, WORD_DIC, read_efml
from ..bilm.options import BiLMOptions
from ..bilm.weights import FORMATS, detect_format, read_hdf5, resolve_paths
from ..errors import ElmoError, Errors
from . import app, fail

PARTS = (("char embedding", "char_embed"), ("char CNN", "CNN/"), ("highway", "CNN_high_"),
         ("projection", "CNN_proj/"), ("LSTM forward", "RNN_0/"), ("LSTM backward", "RNN_1/"))
EFML_PARTS = (("word embedding", TOKEN_EMBEDDER, "word_emb_layer."),
              ("char embedding", TOKEN_EMBEDDER, "char_emb_layer."),
              ("char CNN", TOKEN_EMBEDDER, "convolutions."),
              ("highway", TOKEN_EMBEDDER, "highways."),
              ("projection", TOKEN_EMBEDDER, "projection."),
              ("LSTM forward", ENCODER, "forward_"), ("LSTM backward", ENCODER, "backward_"))


@app.command("info")
def info_cli(
    weights: Path = typer.Argument(..., metavar="WEIGHTS_OR_DIR", help=(
        "weights.hdf5, a directory with weights.hdf5 and options.json, or an "
        "ELMoForManyLangs model directory.")),
    options: Optional[Path] = typer.Option(None, "--options", help=(
        "options.json (default: the one beside the weights); for an ELMoForManyLangs model, "
        "its network config when the model directory lacks it.")),
    weights_format: str = typer.Option("auto", "--format", help=(
        "auto (detected), allennlp or efml.")),
) -> None:
    """Show a biLM's options, parameter counts per part, and its output layers."""
    try:
        opts, counts, files = describe(weights, options, weights_format=weights_format)
    except ElmoError as err:
        fail(str(err))
    msg.divider("Files")
    msg.table(files)
    msg.divider("Options")
    msg.table([(key, str(value)) for key, value in opts.as_dict().items() if key != "extra"])
    msg.divider("Parameters")
    msg.table([(part, f"{n:,}") for part, n in counts.items()], aligns=("l", "r"))
    msg.divider("Output")
    msg.text(f"{opts.n_output_layers} layers (token layer + {opts.n_layers} LSTM layers), "
             f"each {opts.output_dim} wide")


def describe(weights: Path, options: Optional[Path] = None, *, weights_format: str = "auto"
             ) -> Tuple[BiLMOptions, Dict[str, int], List[Tuple[str, str]]]:
    """Options, parameter counts per part (and 'total'), and the files read (label, path).

    Every stored tensor is read and checked against the options, so a broken file fails
    here."""
    if weights_format not in FORMATS:
        raise ElmoError(Errors.E012.format(value=weights_format, name="--format",
                                           choices=list(FORMATS)))
    if weights_format == "auto":
        weights_format = detect_format(weights)
    if weights_format == "efml":
        return _describe_efml(Path(weights), options)
    options_path, weights_path = resolve_paths(weights, options)
    opts = BiLMOptions.from_file(options_path)
    arrays = read_hdf5(weights_path, opts)
    counts = {part: sum(a.size for name, a in arrays.items() if name.startswith(prefix))
              for part, prefix in PARTS}
    counts["total"] = sum(a.size for a in arrays.values())
    files = [("format", "bilm-tf/AllenNLP"), ("options", str(options_path)),
             ("weights", str(weights_path))]
    return opts, counts, files


def _describe_efml(directory: Path, network_config: Optional[Path]
                   ) -> Tuple[BiLMOptions, Dict[str, int], List[Tuple[str, str]]]:
    model = read_efml(directory, network_config)
    opts, dictionary, states = model.options, model.dictionary, model.states
    counts = {part: sum(t.numel() for name, t in states[file].items() if name.startswith(prefix))
              for part, file, prefix in EFML_PARTS}
    if not opts.word_dim:
        del counts["word embedding"]
    counts["total"] = sum(t.numel() for state in states.values() for t in state.values())
    files = [("format", "ELMoForManyLangs"),
             ("network config", model.network_config),
             (CHAR_DIC, f"{directory / CHAR_DIC} ({len(dictionary.chars):,} entries)")]
    if dictionary.words:
        files.append((WORD_DIC, f"{directory / WORD_DIC} ({len(dictionary.words):,} entries)"))
    files += [(name, str(directory / name)) for name in (TOKEN_EMBEDDER, ENCODER)]
    return opts, counts, files
