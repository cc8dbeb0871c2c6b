"""bf16 arithmetic of the biLM: bf16 copies of the weights, products in bf16, sums in fp32.

A product casts its fp32 activations to bf16 and multiplies them by a bf16 copy of the
weight (the kernels accumulate in fp32 and round the result to bf16); the result is added
into, or returned as, fp32. Biases, gate sums, the cell state, clips, residuals and outputs
stay fp32, and so do the parameters. Inference keeps the copies until the weights change
(`stamp.DerivedCopies`); training casts them once per step from the fp32 master weights
(differentiably where autograd runs the backward; `lstm_fused` computes its own).

The same helpers run fp32 products when given fp32 weights, op for op as before, so one
code path serves both precisions.
"""

from __future__ import annotations

from typing import Optional

import torch

BF16 = torch.bfloat16


def bmm(a: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """a (b, n, k) @ w (b, k, m): in bf16 (fp32 result) when w is a bf16 copy."""
    if w.dtype == a.dtype:
        return torch.bmm(a, w)
    return torch.bmm(a.to(w.dtype), w).float()


def baddbmm(c: torch.Tensor, a: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """c + a @ w: the product in bf16 when w is a bf16 copy, the sum in c's fp32."""
    if w.dtype == c.dtype:
        return torch.baddbmm(c, a, w)
    return torch.add(c, torch.bmm(a.to(w.dtype), w))


def bmm_t(a: torch.Tensor, b: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """a (b, k, n) transposed @ b (b, k, m), with both cast to `dtype` first (fp32 result):
    the weight gradients of the fused LSTM backward."""
    if dtype == a.dtype:
        return torch.bmm(a.transpose(1, 2), b)
    return torch.bmm(a.transpose(1, 2).to(dtype), b.to(dtype)).float()


def copy(weight: torch.Tensor) -> torch.Tensor:
    """A bf16 copy of a weight: detached when no gradient is wanted (kept for inference),
    else a cast autograd differentiates (its gradient reaches the fp32 weight)."""
    return weight.to(BF16) if torch.is_grad_enabled() else weight.detach().to(BF16)


class Bf16Linear:
    """x (n, in) -> x @ w_t + b in fp32, the product in bf16; w_t (in, out) a bf16 copy."""

    def __init__(self, w_t: torch.Tensor, bias: Optional[torch.Tensor]) -> None:
        self.w_t = w_t
        self.bias = bias

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        out = x.to(BF16) @ self.w_t
        return out.float() if self.bias is None else torch.add(self.bias, out)
