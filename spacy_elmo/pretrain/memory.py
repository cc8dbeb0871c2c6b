"""The memory a pretraining run's sizes need, checked before the run reads or writes
anything: one step holds batch_size x window tokens in each direction (their text, ids and
activations, the sampled softmax's logits the most), and the shuffle buffer holds
shuffle_buffer sentences. A run that cannot fit in the memory available is refused (E171),
one that would take more than half of it is warned about (W027), both with the figure.

The figures per token and per sentence were measured here (tiny biLM, 8 negatives: 4.0-4.3
KB a token for one step, peak resident memory; 590 B a buffered sentence of 3-12 words)
and grow with the shape as the activations do; they are estimates, not bounds.
"""

from __future__ import annotations

import os
from typing import Optional

import torch

from ..bilm.options import BiLMOptions
from ..errors import ElmoError, Errors, Warnings, warn
from .config import PretrainConfig

TOKEN_BYTES = 2048  # a token's text, ids and embedding, beyond the shape-dependent part
SENTENCE_BYTES = 600  # a sentence in the shuffle buffer (Python lists of strings)


def step_bytes(config: PretrainConfig, options: Optional[BiLMOptions]) -> int:
    """About what one training step holds: per token and direction, the sampled softmax's
    logits and their gradient, and each LSTM layer's gates, cell and projection kept for
    the backward pass (no LSTM part when the shape is not known yet)."""
    lstm = 0 if options is None else options.n_layers * (
        6 * options.lstm_dim + 2 * options.projection_dim) * 8
    per_token = TOKEN_BYTES + 2 * (8 * (config.n_negatives + 1) + lstm)
    return config.batch_size * config.window * per_token


def available_memory() -> Optional[int]:
    """The memory this machine has available now (Linux: MemAvailable), or None."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def check_memory(config: PretrainConfig, device: torch.device) -> None:
    """E171 when the step and the shuffle buffer need more memory than is available (the
    host's, shared by this machine's processes under torchrun; on a GPU also the device's
    free memory for the step); W027 when they need more than half of it."""
    options = None if config.init_weights else config.bilm_options()
    step = step_bytes(config, options)
    buffer = config.shuffle_buffer * SENTENCE_BYTES
    processes = int(os.environ.get("LOCAL_WORLD_SIZE", "1") or 1)
    detail = (f"{config.batch_size:,} rows x {config.window:,} tokens a step, "
              f"{config.shuffle_buffer:,} sentences in the shuffle buffer"
              + (f", {processes} processes" if processes > 1 else ""))
    needs = [("The run's step and shuffle buffer", (step + buffer) * processes,
              available_memory())]
    if device.type == "cuda":
        needs.append(("The run's step on the GPU", step, torch.cuda.mem_get_info(device)[0]))
    for what, need, have in needs:
        if have is None:
            continue
        if need > have:
            raise ElmoError(Errors.E171.format(
                what=what, need=human_size(need), have=human_size(have), detail=detail,
                fix="Lower --batch-size, --window or --shuffle-buffer"))
        if 2 * need > have:
            warn(Warnings.W027.format(what=what, need=human_size(need), have=human_size(have),
                                      detail=detail), stacklevel=2)


def human_size(n: int) -> str:
    return f"{n / 2**30:,.1f} GB" if n >= 2**30 else f"{n / 2**20:,.0f} MB"
