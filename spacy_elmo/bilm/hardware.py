"""What the machine multiplies matrices with: the CPU's name and feature flags, native bf16
and int8 dot products, the switch that runs bf16 where it is emulated, the device a
`--gpu-id` names, and the device in words.

This is the one place that decides whether bf16 is native: on a CPU, the AVX512-BF16 or AMX
flags (torch's own `torch.backends.cpu.get_cpu_capability()` says "AVX512" both with and
without them, and torch runs bf16 matmuls anyway, emulated, far slower than fp32); on a GPU,
CUDA's bf16 support without emulation.
"""

from __future__ import annotations

import os
import platform
from pathlib import Path
from typing import Set

import torch

from ..errors import ElmoError, Errors

# "1": run precision "bf16" even where this module says it is emulated (slow; tests, or
# users who accept the speed)
ALLOW_EMULATED_BF16 = "SPACY_ELMO_ALLOW_EMULATED_BF16"
BF16_FLAGS = {"avx512_bf16", "amx_bf16"}
# u8 x s8 dot products into int32 without the int16 step that can saturate
VNNI_FLAGS = {"avx512_vnni", "avx_vnni", "amx_int8"}


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


def cpu_isa() -> str:
    """The CPU's matrix-relevant instruction sets in words, e.g. "AVX-512, VNNI, no native
    bf16" (torch's capability level first)."""
    flags = cpu_flags()
    parts = [torch.backends.cpu.get_cpu_capability()]
    parts += [name for flag, name in (("avx512_vnni", "AVX512-VNNI"), ("avx_vnni", "AVX-VNNI"),
                                      ("avx512_bf16", "AVX512-BF16"), ("amx_bf16", "AMX-BF16"),
                                      ("amx_int8", "AMX-INT8")) if flag in flags]
    if not flags & BF16_FLAGS:
        parts.append("no native bf16")
    return ", ".join(parts)


def native_bf16(device: torch.device) -> bool:
    """Whether `device` multiplies bf16 matrices in hardware."""
    if device.type == "cuda":
        return bool(torch.cuda.is_bf16_supported(including_emulation=False))
    return bool(BF16_FLAGS & cpu_flags())


def emulated_bf16_allowed() -> bool:
    """Whether the user asked for bf16 where it is emulated (ALLOW_EMULATED_BF16=1)."""
    return os.environ.get(ALLOW_EMULATED_BF16, "") == "1"


def native_int8_dot() -> bool:
    """Whether the CPU adds u8 x s8 products straight into int32 (VNNI or AMX), so that
    activations can use all 8 bits (without it, pairs of products pass through int16 and can
    saturate: 7-bit activations avoid that)."""
    return bool(VNNI_FLAGS & cpu_flags())


def select_device(gpu_id: int) -> torch.device:
    """cpu for a negative id, else cuda:<id> (checked)."""
    if gpu_id < 0:
        return torch.device("cpu")
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if count == 0:
        raise ElmoError(Errors.E015.format(gpu_id=gpu_id))
    if gpu_id >= count:
        raise ElmoError(Errors.E023.format(gpu_id=gpu_id, count=count, last=count - 1))
    return torch.device("cuda", gpu_id)


def describe_device(device: torch.device) -> str:
    """The device in words: "NVIDIA H200" or "2-core AMD EPYC 7B13 (CPU only)"."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"{os.cpu_count() or '?'}-core {cpu_model()} (CPU only)"
