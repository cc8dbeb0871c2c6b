"""Mixed precision for pretraining: bf16 matmuls over fp32 master weights.

With `precision = "bf16"` the model's forward runs under `torch.autocast` (matmuls and
convolutions in bf16, weights cast once per step by autocast's cache); parameters,
gradients, the optimizer, the LSTM cell state, the loss and the carried state stay fp32.
"""

from __future__ import annotations

from typing import ContextManager

import torch

from ..errors import Warnings, warn
from .machine import cpu_flags


def autocast(device: torch.device, precision: str) -> ContextManager[object]:
    """The context a training forward runs in (a no-op for fp32)."""
    return torch.autocast(device.type, dtype=torch.bfloat16, enabled=precision == "bf16")


def native_bf16(device: torch.device) -> bool:
    """Whether `device` multiplies bf16 matrices in hardware."""
    if device.type == "cuda":
        return bool(torch.cuda.is_bf16_supported())
    return bool({"avx512_bf16", "amx_bf16"} & cpu_flags())


def check_precision(device: torch.device, precision: str) -> None:
    """Warn when bf16 is asked for on a device that would emulate it."""
    if precision == "bf16" and not native_bf16(device):
        warn(Warnings.W010.format(device=device.type.upper()), stacklevel=2)
