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
        n = o.n_filters
        self.conv_weight = nn.Parameter(torch.zeros(n, o.char_embed_dim, self.max_width))
        self.conv_bias = nn.Parameter(torch.zeros(n))
        widths = torch.cat([torch.full((k,), w) for w, k in o.filters])
        n_pos = o.max_characters_per_token
        # valid[f, p]: window p lies inside the token for filter f
        valid = torch.arange(n_pos)[None, :] <= (n_pos - widths)[:, None]
        self.register_buffer("invalid_positions", ~valid, persistent=False)
        self.register_buffer("kernel_mask", (torch.arange(self.max_width)[None, :]
                                             < widths[:, None]).float(), persistent=False)
        # highway: rows [0, n) are the transform, rows [n, 2n) the carry gate
        self.highways = nn.ModuleList(nn.Linear(n, 2 * n) for _ in range(o.n_highway))
        self.projection = nn.Linear(n, o.projection_dim)
        self.activation = torch.relu if o.activation == "relu" else torch.tanh
        self.reset_parameters()

    def reset_parameters(self) -> None:
        nn.init.uniform_(self.char_embedding.weight, -1.0, 1.0)
        with torch.no_grad():
            self.char_embedding.weight[0].zero_()
        start = 0
        for width, k in self.options.filters:
            bound = (1.0 / (self.options.char_embed_dim * width)) ** 0.5
            nn.init.uniform_(self.conv_weight[start : start + k, :, :width], -bound, bound)
            start += k
        nn.init.zeros_(self.conv_bias)
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
        weight = self.conv_weight * self.kernel_mask[:, None, :]
        conv = F.conv1d(x, weight)  # (N, n_filters, chars)
        conv = conv.masked_fill(self.invalid_positions, float("-inf"))
        h = self.activation(conv.max(dim=-1).values + self.conv_bias)
        for hw in self.highways:
            both = hw(h)
            carry = torch.sigmoid(both[:, n:])
            h = carry * torch.relu(both[:, :n]) + (1.0 - carry) * h
        return self.projection(h)
