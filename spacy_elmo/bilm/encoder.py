"""The context-independent token encoder: char CNN, highway layers, projection."""

from __future__ import annotations

from typing import Callable, Iterable, Iterator, List, NamedTuple, Tuple, cast

import torch
import torch.nn.functional as F
from torch import nn

from . import bf16
from .int8 import Int8Matmul
from .options import BiLMOptions
from .precision import active_precision
from .stamp import DerivedCopies, WeightsVersion

Product = Callable[[torch.Tensor], torch.Tensor]


class Products(NamedTuple):
    """What a forward multiplies by: the char CNN's filters (n_filters, dim, max_width) and
    the character embedding table they read (fp32, or bf16 copies), and the highway and
    projection products."""

    filters: torch.Tensor
    chars: torch.Tensor
    linears: List[Product]


class CharCNNEncoder(nn.Module):
    """Maps (n_tokens, max_chars) shifted char ids to (n_tokens, projection_dim) vectors.

    With `word_dim` in the options (the ELMoForManyLangs variant), rows have one more column,
    the shifted word id, and the projection reads [word vector; highway output].

    All filters run as one matrix product over unfolded character windows: each kernel is
    zero-padded on the right to the widest width, and positions past a filter's own last
    valid window are excluded from its max. Exact shortcut: every window made only of the
    padding character gives the same value, so tokens are grouped by how many characters
    they use and each group computes only the windows that start inside its tokens, plus
    that one constant. `pad_id` is the (shifted) id of the padding character inside a
    token, which depends on the character vocabulary (`CharIds.pad_id`).
    """

    last_start: torch.Tensor
    positions_per_chunk = 2048  # rows x window starts per matmul (bounds its memory)

    def __init__(self, options: BiLMOptions, *, pad_id: int) -> None:
        super().__init__()
        self.options = options
        o = options
        self.pad_id = pad_id
        self.char_embedding = nn.Embedding(o.n_characters, o.char_embed_dim, padding_idx=0)
        self.word_embedding = (nn.Embedding(o.n_words, o.word_dim, padding_idx=0)
                               if o.word_dim else None)
        self.max_width = max(w for w, _ in o.filters)
        self.conv_weights = nn.ParameterList(
            nn.Parameter(torch.empty(n, o.char_embed_dim, w)) for w, n in o.filters)
        self.conv_biases = nn.ParameterList(nn.Parameter(torch.zeros(n)) for _, n in o.filters)
        widths = torch.cat([torch.full((n,), w) for w, n in o.filters])
        # the last valid window start of each output column
        self.register_buffer("last_start", o.max_characters_per_token - widths,
                             persistent=False)
        # highway: rows [0, F) are the transform, rows [F, 2F) the carry gate
        self.highways = nn.ModuleList(nn.Linear(o.n_filters, 2 * o.n_filters)
                                      for _ in range(o.n_highway))
        self.projection = nn.Linear(o.word_dim + o.n_filters, o.projection_dim)
        self.activation = torch.relu if o.activation == "relu" else torch.tanh
        # without gradients `precision`, with them `training_precision` (`precision.py`):
        # "bf16" runs the char CNN, highways and projection in bf16; "int8" (inference
        # only) the highway and projection products through int8 copies (the char CNN
        # stays fp32)
        self.precision = "fp32"
        self.training_precision = "fp32"
        self.copies = DerivedCopies()
        self.version = WeightsVersion(self)  # a biLM gives its parts its own
        self.reset_parameters()

    def _padded_filters(self) -> torch.Tensor:
        """Every filter zero-padded on the right to the widest: (n_filters, dim, max_width)."""
        return torch.cat([F.pad(w, (0, self.max_width - w.shape[-1]))
                          for w in self.conv_weights])

    def products(self) -> Products:
        """The filters, character table and linear products of a call now: the parameters
        and layers themselves (fp32), bf16 copies (kept for inference until the weights
        change, cast anew with gradients), or int8 copies of the linear layers."""
        precision = active_precision(self.precision, self.training_precision)
        layers = [*cast(Iterable[nn.Linear], self.highways), self.projection]
        if precision == "fp32":
            return Products(self._padded_filters(), self.char_embedding.weight, list(layers))

        def make() -> Products:
            if precision == "int8":
                return Products(self._padded_filters(), self.char_embedding.weight,
                                [Int8Matmul(layer.weight.t(), layer.bias) for layer in layers])
            return Products(bf16.copy(self._padded_filters()),
                            bf16.copy(self.char_embedding.weight),
                            [bf16.Bf16Linear(bf16.copy(layer.weight.t()), layer.bias)
                             for layer in layers])

        if torch.is_grad_enabled():
            return make()
        return self.copies.get(precision, self.version, make)

    def reset_parameters(self) -> None:
        for embedding in (self.char_embedding, self.word_embedding):
            if embedding is not None:
                nn.init.uniform_(embedding.weight, -1.0, 1.0)
                with torch.no_grad():
                    embedding.weight[0].zero_()
        for weight in self.conv_weights:
            bound = (1.0 / (weight.shape[1] * weight.shape[2])) ** 0.5
            nn.init.uniform_(weight, -bound, bound)
        for bias in self.conv_biases:
            nn.init.zeros_(bias)
        n = self.options.n_filters
        for hw in cast(Iterable[nn.Linear], self.highways):
            nn.init.normal_(hw.weight, std=(1.0 / n) ** 0.5)
            nn.init.zeros_(hw.bias[:n])
            nn.init.constant_(hw.bias[n:], -2.0)
        nn.init.normal_(self.projection.weight, std=(1.0 / n) ** 0.5)
        nn.init.zeros_(self.projection.bias)

    def forward(self, char_ids: torch.Tensor) -> torch.Tensor:
        n = self.options.n_filters
        chars = char_ids[:, : self.options.max_characters_per_token]
        products = self.products()
        h = self.activation(self.max_pool_conv(chars, products)
                            + torch.cat(list(self.conv_biases)))
        *highways, projection = products.linears
        for hw in highways:
            both = hw(h)
            # carry * relu(transform) + (1 - carry) * h, in fewer passes
            h = torch.addcmul(h, torch.sigmoid(both[:, n:]), torch.relu(both[:, :n]) - h)
        if self.word_embedding is not None:
            words = self.word_embedding(char_ids[:, self.options.max_characters_per_token])
            h = torch.cat([words, h], dim=-1)
        return projection(h)

    def max_pool_conv(self, char_ids: torch.Tensor, products: Products) -> torch.Tensor:
        """(N, chars) ids -> (N, n_filters): each filter's max over positions, no bias (in
        the dtype of the products' filters)."""
        weight, table = products.filters, products.chars  # (n_filters, dim, max_width)
        # the value of a window made only of padding characters
        pad_window = torch.einsum("fdk,d->f", weight, table[self.pad_id])
        used = _used_lengths(char_ids, self.pad_id)
        order = torch.argsort(used, stable=True)
        pooled: List[torch.Tensor] = []
        flat_weight = weight.flatten(1).t()  # (dim * max_width, n_filters)
        for start, stop, n_pos in self._chunks(used[order].tolist()):
            rows = order[start:stop]
            pooled.append(self._pool_chunk(char_ids[rows], n_pos, flat_weight, table))
        out = torch.cat(pooled)[torch.argsort(order)] if pooled else (
            flat_weight.new_zeros(0, flat_weight.shape[1]))
        needs_pad = used[:, None] <= self.last_start[None, :]
        return torch.where(needs_pad, torch.maximum(out, pad_window), out)

    def _chunks(self, sorted_used: List[int]) -> Iterator[Tuple[int, int, int]]:
        """(start, stop, positions) runs of length-sorted rows, bounded in rows x positions."""
        start = 0
        for i, used in enumerate(sorted_used):
            n_pos = max(1, used)
            if (i + 1 - start) * n_pos > self.positions_per_chunk and i > start:
                yield start, i, max(1, sorted_used[i - 1])
                start = i
        if start < len(sorted_used):
            yield start, len(sorted_used), max(1, sorted_used[-1])

    def _pool_chunk(self, char_ids: torch.Tensor, n_pos: int, flat_weight: torch.Tensor,
                    table: torch.Tensor) -> torch.Tensor:
        """Max over the first `n_pos` window starts of (rows, chars) ids."""
        n_chars = char_ids.shape[1]
        x = F.embedding(char_ids[:, : n_pos + self.max_width - 1], table, padding_idx=0)
        x = F.pad(x, (0, 0, 0, n_pos + self.max_width - 1 - x.shape[1]))
        windows = x.unfold(1, self.max_width, 1)  # (rows, n_pos, dim, max_width)
        conv = (windows.reshape(-1, flat_weight.shape[0]) @ flat_weight).view(
            char_ids.shape[0], n_pos, -1)
        if n_pos + self.max_width - 1 > n_chars:  # some windows run past the token's end
            starts = torch.arange(n_pos, device=conv.device)
            conv = conv.masked_fill(starts[:, None] > self.last_start[None, :], float("-inf"))
        return conv.amax(1)


def _used_lengths(char_ids: torch.Tensor, pad_id: int) -> torch.Tensor:
    """Per row, 1 + the last position whose id is not the padding character (0 if none)."""
    positions = torch.arange(1, char_ids.shape[1] + 1, device=char_ids.device)
    return ((char_ids != pad_id) * positions).amax(1) if char_ids.shape[0] else (
        positions.new_zeros(0))
