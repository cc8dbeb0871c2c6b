"""The `embed` job: every line of a file through a biLM into one HDF5 file, or into this
process's shard of it (`shards.py`) and, once every shard is done, their index."""

from __future__ import annotations

import itertools
import os
import sys
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple

import numpy as np
import torch
from tqdm import tqdm
from wasabi import msg

from ..bilm.embedder import LAYER_MODES
from ..bilm.hardware import select_device
from ..bilm.io.sources import bundled, options_beside
from ..bilm.io.weights import load_bilm
from ..bilm.model import BiLM
from ..bilm.precision import check_precision
from ..bilm.stamp import content_digest
from ..bilm.windows import BATCH_SIZE, WINDOW, WORD_CACHE
from ..errors import ElmoError, Errors, Warnings, warn
from ..files import PathLike
from ..files.guard import guard_output
from ..ml.settings import ElmoSettings
from ..validation import check_all, integer, thread_count
from .files import STDIN, count_lines, read_lines, write_embeddings
from .shards import (
    DAMAGED,
    DONE,
    MISSING,
    OTHER,
    UNREADABLE,
    Shard,
    numbered,
    parse_shard,
    shard_from_env,
    shard_path,
    shard_state,
    signature,
    write_index,
    write_shard,
)


def embed_file(input_path: Path, output_path: Path, *, weights: Optional[PathLike] = None,
               lang: str = "en", options: Optional[PathLike] = None,
               weights_format: str = "auto", layers: str = "all", batch_size: int = BATCH_SIZE,
               stateful: bool = False, gpu_id: int = -1, word_cache: int = WORD_CACHE,
               window: int = WINDOW, precision: str = "fp32", shard: Optional[str] = None,
               overwrite: bool = False, progress: bool = True,
               threads: Optional[int] = None) -> int:
    """The `embed` command as a function; returns the number of lines written. Without
    `weights`, the biLM bundled for `lang`.

    INPUT is read once, so a pipe or standard input ("-") works (the progress bar then
    counts without a total). OUTPUT is never INPUT, and an existing OUTPUT is replaced only
    with `overwrite`. With `shard` ("i/N", or torchrun's RANK/WORLD_SIZE), only that
    shard's lines (see shards.py); returns how many it wrote."""
    if layers not in LAYER_MODES:
        raise ElmoError(Errors.E012.format(value=layers, name="--layers",
                                           choices=list(LAYER_MODES)))
    check_all({"--batch-size": batch_size, "--window": window, "--word-cache": word_cache,
               "--threads": threads},
              {"--batch-size": integer(1), "--window": integer(1), "--word-cache": integer(0),
               "--threads": thread_count(optional=True)},
              Errors.E020)
    part = parse_shard(shard) if shard is not None else shard_from_env()
    if part is not None and stateful:
        raise ElmoError(Errors.E156)
    if part is not None and str(input_path) == STDIN:
        raise ElmoError(Errors.E154.format(input=input_path))
    if part is not None and gpu_id >= 0 and "LOCAL_RANK" in os.environ:
        gpu_id = int(os.environ["LOCAL_RANK"])  # one GPU per rank on each machine
    if weights is None:
        bundled(lang, where="command")  # --lang without a bundled biLM: say --weights
    lines = read_lines(input_path)  # checks the file before the model is loaded
    # the model's files are inputs too: OUTPUT may never replace them, even with --overwrite
    # (a weights file protects itself and the options beside it, not the folder it is in)
    local = [Path(p) for p in (weights, options) if p is not None and "://" not in str(p)]
    beside = [c for p in local if p.is_file() and options is None for c in options_beside(p)]
    guard_output(output_path, inputs=[input_path, *local, *beside], overwrite=overwrite)
    device = select_device(gpu_id)
    check_precision(precision, device)
    if threads is not None:
        torch.set_num_threads(threads)
    bilm = load_bilm(weights, options, format=weights_format, lang=lang)
    if part is not None:  # the shard's key: the input, the settings and the weights' content
        key = {"bilm": content_digest(bilm, _bilm_settings(bilm)), "layers": layers,
               "window": window, "precision": precision, "shards": part.count}
        sig = signature(Path(input_path), key)
        if _keep_shard(shard_path(Path(output_path), part), part, sig, overwrite):
            _finish_shards(Path(output_path), part, sig)
            return 0
        Path(output_path).unlink(missing_ok=True)  # an index of earlier shards (--overwrite)
    settings = ElmoSettings(batch_size=batch_size, window=window, word_cache_size=word_cache,
                            precision=precision)
    embedder = settings.embedder(bilm.to(device), layers=layers, stateful=stateful)
    if part is not None:
        total: List[int] = []
        mine, for_index_k = itertools.tee(numbered(lines, part, total))
        arrays = embedder.embed(line.split() for _, line in mine)
        shard_items: Iterator[Tuple[int, str, np.ndarray]] = (
            (k, line, array) for (k, line), array in zip(for_index_k, arrays, strict=True))
        if progress:
            shard_items = tqdm(shard_items, unit="line", file=sys.stderr)
        n = write_shard(shard_path(Path(output_path), part), shard_items, sig, total)
        msg.good(f"Wrote {n} sentence(s) to '{shard_path(Path(output_path), part)}' "
                 f"(shard {part}).")
        _finish_shards(Path(output_path), part, sig)
        return n
    for_model, for_index = itertools.tee(lines)
    arrays = embedder.embed(line.split() for line in for_model)
    items = zip(for_index, arrays, strict=True)
    if progress:
        items = tqdm(items, total=count_lines(input_path), unit="line", file=sys.stderr)
    return write_embeddings(output_path, items)


def _bilm_settings(bilm: BiLM) -> Dict[str, Any]:
    """What a biLM computes with besides its tensors: its options and dictionary."""
    return {"options": bilm.options.to_json_dict(),
            "dictionary": None if bilm.dictionary is None else bilm.dictionary.to_dict()}


def _keep_shard(path: Path, part: Shard, sig: str, overwrite: bool) -> bool:
    """Whether this shard's file is finished: made from the same input, settings and
    weights, its data intact. With `overwrite` it is made again in any case; a damaged one
    is made again (W025); one of another signature, or no shard file, is E155."""
    state, detail = (MISSING, "") if overwrite else shard_state(path, sig)
    if state == DONE:
        msg.info(f"Shard {part} is done already (same INPUT, settings and weights): kept "
                 f"'{path}'. Pass --overwrite to make it again.")
        return True
    if state == DAMAGED:
        warn(Warnings.W025.format(path=path, detail=detail, action="making it again"))
    elif state != MISSING:
        why = (_OTHER if state == OTHER
               else f"cannot be read as a shard file ({detail}): it is damaged or no shard")
        raise ElmoError(Errors.E155.format(path=path, why=why))
    return False


_OTHER = "was made from another INPUT, other settings or other weights"


def _finish_shards(output: Path, part: Shard, sig: str) -> None:
    """Write OUTPUT's index once every shard is finished (the last one to finish does);
    shard files of another signature or damaged ones keep it from being written, and say
    which shards to run again."""
    paths = [shard_path(output, Shard(i, part.count)) for i in range(part.count)]
    states = [shard_state(path, sig, verify=False)[0] for path in paths]
    if all(state == DONE for state in states):  # read them all once, for the index
        states = [shard_state(path, sig)[0] for path in paths]
        for path, state in zip(paths, states, strict=True):
            if state == DAMAGED:
                warn(Warnings.W025.format(path=path, detail="its data do not match the "
                                          "checksum written with it", action="not indexed"))
    if all(state == DONE for state in states):
        n = write_index(output, part.count)
        msg.good(f"All {part.count} shards done: '{output}' indexes {n} line(s).")
        return
    labels = {MISSING: "still missing",
              OTHER: "made from another INPUT, other settings or other weights (run them "
                     "again with --overwrite)",
              DAMAGED: "damaged (run them again)",
              UNREADABLE: "not readable as shard files (run them again with --overwrite)"}
    parts = []
    for state, what in labels.items():
        shards = [f"{i}/{part.count}" for i, s in enumerate(states) if s == state]
        if shards:
            parts.append(f"{what}: {', '.join(shards[:10])}"
                         f"{' ...' if len(shards) > 10 else ''}")
    done = states.count(DONE)
    msg.info(f"Shard {part} done; {done} of {part.count} finished. '{output}' is written "
             f"when the last finishes ({'; '.join(parts)}).")
