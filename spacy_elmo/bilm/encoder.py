"""The context-independent token encoder: char CNN, highway layers, projection."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .options import BiLMOptions


class CharCNNEncoder(nn.Module):
    """Maps (n_tokens, max_chars) shifted char ids to (n_tokens, projection_dim) vectors.

    All filters run as one convolution: each kernel is zero-padded on the right to the widest
    width, and positions past a filter's own last valid window are excluded from its max.
    """

    def __init__(self, options: BiLMOptions) -> None:
        super().__init__()
        self.options = options
        o = options
        self.char_embedding = nn.Embedding(o.n_characters, o.char_embed_dim, padding_idx=0)
        self.max_width = max(w for w, _ in o.filters)
        self.conv_weights = nn.ParameterList(
            nn.Parameter(torch.empty(n, o.char_embed_dim, w)) for w, n in o.filters)
        self.conv_biases = nn.ParameterList(nn.Parameter(torch.zeros(n)) for _, n in o.filters)
        widths = torch.cat([torch.full((n,), w) for w, n in o.filters])
        n_pos = o.max_characters_per_token
        valid = torch.arange(n_pos)[None, :] <= (n_pos - widths)[:, None]
        self.register_buffer("invalid_positions", ~valid, persistent=False)
        # highway: rows [0, F) are the transform, rows [F, 2F) the carry gate
        self.highways = nn.ModuleList(nn.Linear(o.n_filters, 2 * o.n_filters)
                                      for _ in range(o.n_highway))
        self.projection = nn.Linear(o.n_filters, o.projection_dim)
        self.activation = torch.relu if o.activation == "relu" else torch.tanh
        self.reset_parameters()

    def reset_parameters(self) -> None:
        nn.init.uniform_(self.char_embedding.weight, -1.0, 1.0)
        with torch.no_grad():
            self.char_embedding.weight[0].zero_()
        for weight in self.conv_weights:
            bound = (1.0 / (weight.shape[1] * weight.shape[2])) ** 0.5
            nn.init.uniform_(weight, -bound, bound)
        for bias in self.conv_biases:
            nn.init.zeros_(bias)
        n = self.options.n_filters
        for hw in self.highways:
            nn.init.normal_(hw.weight, std=(1.0 / n) ** 0.5)
            nn.init.zeros_(hw.bias[:n])
            nn.init.constant_(hw.bias[n:], -2.0)
        nn.init.normal_(self.projection.weight, std=(1.0 / n) ** 0.5)
        nn.init.zeros_(self.projection.bias)

    def forward(self, char_ids: torch.Tensor) -> torch.Tensor:
        n = self.options.n_filters
        x = self.char_embedding(char_ids).transpose(1, 2)  # (N, dim, chars)
        x = F.pad(x, (0, self.max_width - 1))
        weight = torch.cat([F.pad(w, (0, self.max_width - w.shape[-1]))
                            for w in self.conv_weights])
        conv = F.conv1d(x, weight)  # (N, n_filters, chars)
        conv = conv.masked_fill(self.invalid_positions, float("-inf"))
        bias = torch.cat(list(self.conv_biases))
        h = self.activation(conv.max(dim=-1).values + bias)
        for hw in self.highways:
            both = hw(h)
            carry = torch.sigmoid(both[:, n:])
            h = carry * torch.relu(both[:, :n]) + (1.0 - carry) * h
        return self.projection(h)
