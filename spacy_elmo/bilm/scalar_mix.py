"""`ELMo_k = gamma * sum_j softmax(w)_j * h_kj`, with optional per-layer layer norm."""

from __future__ import annotations

from typing import Optional

import torch
from torch import nn


class ScalarMix(nn.Module):
    """A learned mix of L+1 layers; weights start uniform (w = 0) and gamma at 1.

    For PyTorch users of the biLM. Its layer norm follows AllenNLP (one mean and variance per
    layer over all real elements of the batch); the spaCy listeners use
    `spacy-elmo.ScalarMix.v1`, which normalises per token so that a doc's vectors never
    depend on the rest of its batch.
    """

    def __init__(self, n_layers: int, do_layer_norm: bool = False, trainable: bool = True,
                 initial_weights: Optional[list] = None, gamma: float = 1.0) -> None:
        super().__init__()
        init = torch.zeros(n_layers) if initial_weights is None else torch.tensor(
            initial_weights, dtype=torch.float32)
        self.weights = nn.Parameter(init, requires_grad=trainable)
        self.gamma = nn.Parameter(torch.tensor(float(gamma)), requires_grad=trainable)
        self.do_layer_norm = do_layer_norm

    def forward(self, layers: torch.Tensor, mask: Optional[torch.Tensor] = None
                ) -> torch.Tensor:
        """layers: (L+1, ..., width); mask: (...) over real elements, needed for layer norm."""
        if layers.shape[0] != self.weights.shape[0]:
            raise ValueError(f"ScalarMix was made for {self.weights.shape[0]} layers, "
                             f"got {layers.shape[0]}.")
        if self.do_layer_norm:
            layers = _masked_layer_norm(layers, mask)
        probs = torch.softmax(self.weights, dim=0).to(layers.dtype)
        mixed = torch.tensordot(probs, layers, dims=([0], [0]))
        return self.gamma.to(layers.dtype) * mixed


def _masked_layer_norm(layers: torch.Tensor, mask: Optional[torch.Tensor]) -> torch.Tensor:
    """Normalise each layer by one mean/variance over all its real elements."""
    if mask is None:
        mask = torch.ones(layers.shape[1:-1], dtype=torch.bool, device=layers.device)
    m = mask[None, ..., None].to(layers.dtype)
    n = (m.sum(dim=tuple(range(1, layers.dim()))) * layers.shape[-1]).clamp(min=1.0)
    reduce = tuple(range(1, layers.dim()))
    view = (-1,) + (1,) * (layers.dim() - 1)
    mean = (layers * m).sum(dim=reduce) / n
    centred = (layers - mean.view(view)) * m
    var = (centred ** 2).sum(dim=reduce) / n
    return centred / torch.sqrt(var.view(view) + 1e-12)
