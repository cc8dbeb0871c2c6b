"""What a run trains on: the CPU's name and feature flags, the device in words."""

from __future__ import annotations

import os
import platform
from pathlib import Path
from typing import Set

import torch


def _cpuinfo_field(name: str) -> str:
    """The first value of `name` in /proc/cpuinfo (Linux; "" elsewhere)."""
    try:
        info = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    for line in info.splitlines():
        if line.split(":", 1)[0].strip() == name:
            return line.split(":", 1)[1].strip()
    return ""


def cpu_flags() -> Set[str]:
    """The CPU's feature flags (Linux; empty elsewhere)."""
    return set(_cpuinfo_field("flags").split())


def cpu_model() -> str:
    """The CPU's model name, e.g. "AMD EPYC 7B13"."""
    return _cpuinfo_field("model name") or platform.processor() or "unknown CPU"


def describe_device(device: torch.device) -> str:
    """The device in words: "NVIDIA H200" or "2-core AMD EPYC 7B13 (CPU only)"."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"{os.cpu_count() or '?'}-core {cpu_model()} (CPU only)"
