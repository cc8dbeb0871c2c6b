"""What a run trains on: the device in words (the CPU's name and flags: `bilm.hardware`)."""

from __future__ import annotations

import os

import torch

from ..bilm.hardware import cpu_model


def describe_device(device: torch.device) -> str:
    """The device in words: "NVIDIA H200" or "2-core AMD EPYC 7B13 (CPU only)"."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"{os.cpu_count() or '?'}-core {cpu_model()} (CPU only)"
