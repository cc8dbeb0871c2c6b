"""int8 inference on CPU: the biLM's matrix products with int8 weights.

Each weight matrix of the token encoder's highway and projection layers and of every LSTM
(input, recurrent and projection matrices, both directions) gets an int8 copy, quantized
symmetrically per output column; activations are quantized per call (dynamic quantization),
products accumulate in int32 and come back in fp32, through torch's `quantized::linear_dynamic`
kernels on the best engine this CPU has (`int8_engine`). The character CNN, the gates,
clipping, residuals and the cell state stay fp32, and so do the model's parameters: the
int8 copies sit beside them, are not saved, and are made again when the parameters change
(fine-tuning), so a pipeline saved with `precision = "int8"` holds the fp32 weights and
quantizes them when it loads.
"""

from __future__ import annotations

import warnings
from contextlib import contextmanager
from typing import Iterator, Optional

import torch

from .hardware import native_int8_dot


def int8_engine() -> Optional[str]:
    """The quantized engine the int8 products run on here, or None without one: oneDNN where
    the CPU adds int8 products straight into int32 (VNNI; AMX-INT8 tiles on Intel Sapphire
    Rapids and later, which only oneDNN uses), else fbgemm (torch's "x86" engine packs
    linear products for fbgemm), else qnnpack (ARM)."""
    engines = torch.backends.quantized.supported_engines
    order = (("onednn", "x86", "fbgemm", "qnnpack") if native_int8_dot()
             else ("x86", "fbgemm", "onednn", "qnnpack"))
    for engine in order:
        if engine in engines:
            return engine
    return None


@contextmanager
def _engine(engine: Optional[str]) -> Iterator[None]:
    """torch's quantized engine set to `engine` while weights are packed for it (a packed
    weight runs on its own engine's kernels whatever the setting later), then set back."""
    before = torch.backends.quantized.engine
    if engine is not None:
        torch.backends.quantized.engine = engine
    try:
        yield
    finally:
        torch.backends.quantized.engine = before


class Int8Matmul:
    """x (..., in) @ W (in, out) [+ b], with W held as int8 per output column.

    Each row of x is quantized on its own scale, so a sentence's vectors do not depend on
    what else is in the batch (the kernels quantize a whole input on one scale: every row is
    scaled to the same maximum, and two guard rows pin that input's range)."""

    def __init__(self, weight: torch.Tensor, bias: Optional[torch.Tensor] = None) -> None:
        w = weight.detach().to(torch.float32).t().contiguous()  # (out, in), as kernels want
        scales = (w.abs().amax(1) / 127.0).clamp_min(1e-12).to(torch.float64)
        zeros = torch.zeros(w.shape[0], dtype=torch.long)
        with warnings.catch_warnings():
            # torch 2.13 marks quantized tensor creation as deprecated; the kernels it
            # feeds are what runs int8 on CPU today (check_precision says when they're gone)
            warnings.simplefilter("ignore")
            quantized = torch.quantize_per_channel(w, scales, zeros, 0, torch.qint8)
            with _engine(int8_engine()):
                self.packed = torch.ops.quantized.linear_prepack(quantized, None)
        self.bias = None if bias is None else bias.detach().to(torch.float32).clone()
        self.n_out = w.shape[0]
        # without VNNI, pairs of u8 x s8 products are added in int16 (fbgemm's and oneDNN's
        # AVX2 paths): 7-bit activations keep those sums from saturating, as torch's own
        # dynamic quantization does. With VNNI or AMX all 8 bits are safe, and they halve
        # the error (1 - cosine to fp32) of the original shape's layers
        self.reduce_range = not native_int8_dot()
        # the guard rows pin the range to [-1, (levels - zero) / zero]: its zero point is then
        # a whole number (on [-1, 1] it is 63.5, which kernels round either way, and a
        # row's peak of -1 was clipped by one level)
        self.guard = torch.zeros(2, w.shape[1])
        self.guard[0, 0] = -1.0
        self.guard[1, 0] = (self.levels - self.zero) / self.zero

    @property
    def levels(self) -> int:
        """The activations' largest quantized value: 7 bits without VNNI, else 8."""
        return 127 if self.reduce_range else 255

    @property
    def zero(self) -> int:
        """The activations' zero point, a whole number by the guard rows' range."""
        return self.levels // 2

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        flat = x.reshape(-1, x.shape[-1]).to(torch.float32)
        peak = flat.abs().amax(1, keepdim=True).clamp_min(1e-30)
        rows = torch.cat([flat / peak, self.guard])  # every row's peak at 1
        out = torch.ops.quantized.linear_dynamic(rows, self.packed, self.reduce_range)
        out = out[: flat.shape[0]].mul_(peak)
        if self.bias is not None:
            out.add_(self.bias)
        return out.view(*x.shape[:-1], self.n_out)


class DirectionPair:
    """Stacked (2, in, out) weights of both directions as two int8 products:
    x (2, rows, in) -> (2, rows, out)."""

    def __init__(self, weight: torch.Tensor) -> None:
        self.directions = [Int8Matmul(weight[0]), Int8Matmul(weight[1])]

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return torch.stack([mm(x[d]) for d, mm in enumerate(self.directions)])
