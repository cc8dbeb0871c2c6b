"""The precisions the biLM runs in, which one applies to a call, and what a machine refuses.

- "fp32": the exact path.
- "bf16": every matrix product in bf16 through bf16 copies of the weights (`bf16.py`), with
  the gates' sums, the cell state, the clips, residuals and outputs in fp32. Native only on
  CPUs with AVX512-BF16 or AMX and on GPUs from Ampere on; refused elsewhere (E230) unless
  `hardware.ALLOW_EMULATED_BF16` is set.
- "int8": inference on the CPU with int8 copies of the matrices (`int8.py`).

A biLM has an inference precision (calls without gradients: the component, `embed`) and a
training precision (calls with gradients: pretraining; "fp32" or "bf16"); the parameters
stay fp32 either way.
"""

from __future__ import annotations

from typing import Set

import torch

from ..errors import ElmoError, Errors, Warnings, warn
from . import hardware, int8

PRECISIONS = ("fp32", "bf16", "int8")
TRAINING_PRECISIONS = ("fp32", "bf16")
_WARNED: Set[str] = set()  # devices told that bf16 is emulated there


def active_precision(precision: str, training_precision: str) -> str:
    """The precision of a call now: `training_precision` with gradients, else `precision`."""
    return training_precision if torch.is_grad_enabled() else precision


def check_precision_name(precision: str) -> None:
    """E150 for a name that is no precision."""
    if precision not in PRECISIONS:
        raise ElmoError(Errors.E150.format(precision=precision, known=", ".join(PRECISIONS)))


def check_precision(precision: str, device: torch.device, *, training: bool = False) -> None:
    """Refuse a precision this machine can't run: an unknown name (E150; E231 for training),
    int8 off the CPU (E151), a torch without quantized kernels (E152), bf16 where it would
    be emulated (E230; with ALLOW_EMULATED_BF16=1 a warning instead, W010, once a process)."""
    if training and precision not in TRAINING_PRECISIONS:
        raise ElmoError(Errors.E231.format(precision=precision,
                                           known=", ".join(TRAINING_PRECISIONS)))
    check_precision_name(precision)
    if precision == "bf16" and not hardware.native_bf16(device):
        if not hardware.emulated_bf16_allowed():
            raise ElmoError(Errors.E230.format(device=_name(device)))
        if device.type not in _WARNED:  # once a process
            _WARNED.add(device.type)
            warn(Warnings.W010.format(device=_name(device)), stacklevel=2)
    if precision != "int8":
        return
    if device.type != "cpu":
        raise ElmoError(Errors.E151.format(device=device))
    if int8.int8_engine() is None or not hasattr(torch.ops.quantized, "linear_dynamic"):
        raise ElmoError(Errors.E152.format(version=torch.__version__))


def _name(device: torch.device) -> str:
    return "this CPU" if device.type == "cpu" else f"this GPU ({device})"
