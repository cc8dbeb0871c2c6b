"""`spacy-elmo info`: what a biLM holds (options, parameters, output layers), and what this
machine runs it with (CPU, native bf16, the int8 engine)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import torch
import typer
from wasabi import msg

from ..bilm.hardware import ALLOW_EMULATED_BF16, cpu_isa, cpu_model, native_bf16
from ..bilm.int8 import int8_engine
from ..bilm.io.efml import read_efml
from ..bilm.io.sources import locate
from ..bilm.io.weights import read_hdf5
from ..bilm.options import BiLMOptions
from ..errors import ElmoError
from ..files import PathLike
from ..files.names import EFML_CHAR_DIC, EFML_ENCODER, EFML_TOKEN_EMBEDDER, EFML_WORD_DIC
from .common import FORMAT_HELP, OPTIONS_HELP, WEIGHTS_HELP, app, fail

PARTS = (("char embedding", "char_embed"), ("char CNN", "CNN/"), ("highway", "CNN_high_"),
         ("projection", "CNN_proj/"), ("LSTM forward", "RNN_0/"), ("LSTM backward", "RNN_1/"))
EFML_PARTS = (("word embedding", EFML_TOKEN_EMBEDDER, "word_emb_layer."),
              ("char embedding", EFML_TOKEN_EMBEDDER, "char_emb_layer."),
              ("char CNN", EFML_TOKEN_EMBEDDER, "convolutions."),
              ("highway", EFML_TOKEN_EMBEDDER, "highways."),
              ("projection", EFML_TOKEN_EMBEDDER, "projection."),
              ("LSTM forward", EFML_ENCODER, "forward_"),
              ("LSTM backward", EFML_ENCODER, "backward_"))


@app.command("info")
def info_cli(
    weights: str = typer.Argument(..., metavar="WEIGHTS", help=WEIGHTS_HELP),
    options: Optional[str] = typer.Option(None, "--options", help=OPTIONS_HELP),
    weights_format: str = typer.Option("auto", "--format", help=FORMAT_HELP),
) -> None:
    """Show a biLM's options, parameter counts per part, and its output layers; and this
    machine's precisions."""
    try:
        opts, counts, files = describe_bilm(weights, options, weights_format=weights_format)
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
    msg.divider("Machine")
    msg.table(describe_machine())


def describe_machine() -> List[Tuple[str, str]]:
    """What this machine runs a biLM with: the CPU and its instruction sets, the quantized
    engine of precision int8, and whether precision bf16 is native (on the CPU, and on a
    GPU when torch sees one)."""
    cpu = torch.device("cpu")
    engine = int8_engine()
    rows = [("CPU", f"{cpu_model()}, {os.cpu_count() or '?'} cores"), ("CPU ISA", cpu_isa()),
            ("int8 engine", engine or "none (precision int8 unavailable)"),
            ("bf16 on the CPU", _bf16(cpu))]
    if torch.cuda.is_available():
        gpu = torch.device("cuda", 0)
        rows += [("GPU", torch.cuda.get_device_name(gpu)), ("bf16 on the GPU", _bf16(gpu))]
    return rows


def _bf16(device: torch.device) -> str:
    return ("native" if native_bf16(device) else
            f"emulated: precision bf16 refused (E230) unless {ALLOW_EMULATED_BF16}=1")


def describe_bilm(weights: PathLike, options: Optional[PathLike] = None, *,
             weights_format: str = "auto"
             ) -> Tuple[BiLMOptions, Dict[str, int], List[Tuple[str, str]]]:
    """Options, parameter counts per part (and 'total'), and the files read (label, path).

    Every stored tensor is read and checked against the options, so a broken file fails
    here."""
    source = locate(weights, options, format=weights_format)
    if source.format == "efml":
        return _describe_efml(source.weights, source.options)
    assert source.options is not None  # `locate` finds the options of this format
    options_path, weights_path = source.options, source.weights
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
    chars, words = len(dictionary.chars), len(dictionary.words)
    files = [("format", "ELMoForManyLangs"),
             ("network config", model.network_config),
             (EFML_CHAR_DIC, f"{directory / EFML_CHAR_DIC} ({chars:,} entries)")]
    if words:
        files.append((EFML_WORD_DIC, f"{directory / EFML_WORD_DIC} ({words:,} entries)"))
    files += [(name, str(directory / name)) for name in (EFML_TOKEN_EMBEDDER, EFML_ENCODER)]
    return opts, counts, files
