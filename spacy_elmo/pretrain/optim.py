"""Optimizers for biLM pretraining: Adagrad (bilm-tf's), Adam, and Adam with lazy softmax rows.

A sampled softmax gives gradients to the rows of the words in the sample only (the targets
and the drawn negatives). Dense Adam still moves every other row: after a single gradient a
row keeps moving on its momentum, each step by about `lr` per coordinate (the first moment
decays by 0.9 a step, the second by 0.999), some 300 x lr in all, and nothing pulls a rare
word back, since it is seldom drawn as a negative. Its logits grow until the full softmax
puts real mass on it: measured on lm_en with Adam 1e-3, the forward LM's full-softmax dev
perplexity was 20,055 at step 1,000 (the backward LM's 398) while the sampled training loss
kept falling. `LazyAdam` (as TF's LazyAdamOptimizer) updates a softmax row, and its moments,
only at the steps it got a gradient; every other parameter gets torch's fused Adam step.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Iterable, List, Optional

import torch

from ..bilm.lm import BiLanguageModel
from .config import PretrainConfig


class LazyAdam(torch.optim.Adam):
    """Adam; the parameters of groups with `lazy_rows` move only in the rows (first
    dimension) whose gradient is not all zero at that step. The state layout is Adam's."""

    def __init__(self, dense: Iterable[torch.nn.Parameter],
                 lazy: Iterable[torch.nn.Parameter], lr: float) -> None:
        groups: List[Dict[str, Any]] = [{"params": list(dense), "lazy_rows": False},
                                        {"params": list(lazy), "lazy_rows": True}]
        super().__init__(groups, lr=lr, fused=True)

    @torch.no_grad()
    def step(self, closure: Optional[Callable[[], float]] = None) -> Optional[float]:  # type: ignore[override]
        lazy = [(group, p) for group in self.param_groups if group["lazy_rows"]
                for p in group["params"] if p.grad is not None]
        grads = [p.grad for _, p in lazy]
        for _, p in lazy:
            p.grad = None  # the fused step skips them
        loss = super().step(closure)
        for (group, p), grad in zip(lazy, grads, strict=True):
            p.grad = grad
            self._lazy_step(group, p, grad)
        return loss

    def _lazy_step(self, group: Dict[str, Any], p: torch.Tensor, grad: torch.Tensor) -> None:
        state = self.state[p]
        if not state:
            state["step"] = torch.zeros((), dtype=torch.float32, device=p.device)
            state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
            state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
        state["step"] += 1
        touched = grad.ne(0)
        if touched.dim() > 1:
            touched = touched.flatten(1).any(dim=1)
        rows = touched.nonzero().squeeze(1)
        beta1, beta2 = group["betas"]
        step = float(state["step"])
        g = grad[rows]
        m = state["exp_avg"][rows].mul_(beta1).add_(g, alpha=1 - beta1)
        v = state["exp_avg_sq"][rows].mul_(beta2).addcmul_(g, g, value=1 - beta2)
        state["exp_avg"][rows] = m
        state["exp_avg_sq"][rows] = v
        denom = (v.sqrt() / (1 - beta2 ** step) ** 0.5).add_(group["eps"])
        p[rows] -= (group["lr"] / (1 - beta1 ** step)) * m / denom


def make_optimizer(config: PretrainConfig, model: BiLanguageModel) -> torch.optim.Optimizer:
    """Adagrad (bilm-tf's, accumulators start at 1.0), Adam, or Adam with lazy softmax rows
    (`LazyAdam`), all with torch's fused kernel (one pass over each tensor: about 2.4x
    faster than the default step on CPU; the same state, so checkpoints move between the
    two)."""
    params = list(model.parameters())
    if config.optimizer == "lazyadam":
        softmax = list(model.softmax.parameters())
        dense = [p for p in params if not any(p is q for q in softmax)]
        return LazyAdam(dense, softmax, lr=config.lr)
    if config.optimizer == "adam":
        return torch.optim.Adam(params, lr=config.lr, fused=True)
    return torch.optim.Adagrad(params, lr=config.lr, initial_accumulator_value=1.0,
                               fused=True)
