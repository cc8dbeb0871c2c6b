"""`spacy-elmo embed`: ELMo vectors of a text file (one tokenized sentence per line) to HDF5.
The job itself is `spacy_elmo.embed.job.embed_file`."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Optional

import typer
from wasabi import msg

from ..bilm.windows import BATCH_SIZE, WINDOW, WORD_CACHE
from ..embed.job import embed_file
from ..embed.shards import shard_from_env
from ..errors import ElmoError, Errors
from ..files.signals import Terminated
from .common import FORMAT_HELP, OPTIONS_HELP, WEIGHTS_HELP, app, fail

EMBED_HELP = (
    "Write ELMo vectors for every line of INPUT into the HDF5 file OUTPUT.\n\n"
    "One dataset per line, named by the 0-based line number; a blank line gives a dataset "
    "with 0 tokens. A `sentence_to_index` dataset holds JSON mapping each line's text to its "
    "dataset name, as AllenNLP's `elmo` command wrote. INPUT may be '-' (standard input) or "
    "a pipe. Exit status: 0 done, 1 error, 130/143 stopped by Ctrl-C/SIGTERM (no OUTPUT)."
)


@app.command("embed", help=EMBED_HELP)
def embed_cli(
    input_path: Path = typer.Argument(..., metavar="INPUT", help=(
        "UTF-8 text, one whitespace-tokenized sentence per line ('-': standard input).")),
    output_path: Path = typer.Argument(..., metavar="OUTPUT", help="HDF5 file to write."),
    weights: Optional[str] = typer.Option(None, "--weights", help=(
        WEIGHTS_HELP + " Default: the small biLM bundled for --lang.")),
    lang: str = typer.Option("en", "--lang", help=(
        "Language of the bundled biLM used without --weights: en or zh.")),
    options: Optional[str] = typer.Option(None, "--options", help=OPTIONS_HELP),
    weights_format: str = typer.Option("auto", "--format", help=FORMAT_HELP),
    layers: str = typer.Option("all", "--layers", help=(
        "all: (L+1, n_tokens, width) per line; top: the top layer; average: the mean of "
        "all layers (both (n_tokens, width)).")),
    batch_size: int = typer.Option(BATCH_SIZE, "--batch-size", help="Sentences per batch."),
    stateful: bool = typer.Option(False, "--stateful", help=(
        "The reference stateful mode: lines go in file order, --batch-size per batch, and "
        "each batch row starts from the state the previous batch left in that row.")),
    gpu_id: int = typer.Option(-1, "--gpu-id", help="CUDA device to run on (-1: CPU)."),
    word_cache: int = typer.Option(WORD_CACHE, "--word-cache", help=(
        "Cache the token-layer vectors of this many distinct words (0: off; exact).")),
    window: int = typer.Option(WINDOW, "--window", help=(
        "Longer lines run as overlapping windows of this many tokens, with window/4 "
        "tokens of context either side (approximate LSTM layers; see the docs).")),
    threads: Optional[int] = typer.Option(None, "--threads", help=(
        "torch CPU threads of this process (default: torch's, OMP_NUM_THREADS or one per "
        "core). Give 1 when running one process per core (--shard).")),
    precision: str = typer.Option("fp32", "--precision", help=(
        "fp32; bf16: the biLM's products in bf16 where the CPU or GPU has native bf16 "
        "(AVX512-BF16, AMX; Ampere or newer); int8: its matrices as int8 on the CPU (both "
        "faster, close to fp32; see the docs).")),
    shard: Optional[str] = typer.Option(None, "--shard", help=(
        "i/N: embed only every N-th line from line i (0-based) into OUTPUT.shard-<i>-of-<N>.hdf5, "
        "i and N in five digits (out.hdf5.shard-00000-of-00002.hdf5); "
        "the last shard to finish writes OUTPUT, an index that opens as one file. Under "
        "torchrun, RANK/WORLD_SIZE give it. A rerun redoes only missing shards.")),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace an existing OUTPUT."),
) -> None:
    """The `embed` command (help text: EMBED_HELP)."""
    try:
        n = embed_file(input_path, output_path, weights=weights, lang=lang, options=options,
                       weights_format=weights_format, layers=layers, batch_size=batch_size,
                       stateful=stateful, gpu_id=gpu_id, word_cache=word_cache, window=window,
                       precision=precision, shard=shard, overwrite=overwrite,
                       threads=threads)
    except ElmoError as err:
        fail(str(err))
    except KeyboardInterrupt:
        fail(Errors.E029.format(signal="Ctrl-C (SIGINT)", output=output_path), code=130)
    except Terminated as err:
        fail(Errors.E029.format(signal=signal.Signals(err.signum).name, output=output_path),
             code=128 + err.signum)
    if shard is None and shard_from_env() is None:  # a shard says what it did itself
        msg.good(f"Wrote {n} sentence(s) to '{output_path}'.")
