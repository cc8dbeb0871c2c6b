"""A wider biLM that computes what a trained one does: more LSTM cells, same outputs.

The new cells' gate weights are drawn as a fresh layer's are and their projection rows are
zero, so every layer's output (and the ELMo vectors, and the LM's predictions) is the old
biLM's until training moves those rows. The LSTM's gates are four blocks of `lstm_dim`
(input, new memory, forget, output), each widened at its end.
"""

from __future__ import annotations

from typing import cast

import torch

from ..errors import ElmoError, Errors
from .lstm import ProjectedLSTMLayer
from .model import BiLM


def widen_lstm(bilm: BiLM, lstm_dim: int, *, seed: int = 0) -> BiLM:
    """A copy of `bilm` (byte characters) with `lstm_dim` cells a layer and direction,
    in eval mode; `seed` draws the new cells' gate weights."""
    old_dim = bilm.options.lstm_dim
    if bilm.dictionary is not None:
        raise ElmoError(Errors.E276)
    if isinstance(lstm_dim, bool) or not isinstance(lstm_dim, int) or lstm_dim <= old_dim:
        raise ElmoError(Errors.E277.format(given=lstm_dim, have=old_dim))
    wide = BiLM(bilm.options.replace(lstm_dim=lstm_dim))
    wide.load_state_dict({k: v for k, v in bilm.state_dict().items()
                          if not k.startswith("lstm.")}, strict=False)
    generator = torch.Generator().manual_seed(seed)
    for old, new in zip(bilm.lstm.layers, wide.lstm.layers, strict=True):
        _widen_layer(cast(ProjectedLSTMLayer, old), cast(ProjectedLSTMLayer, new), generator)
    return wide.eval()


def _widen_layer(old: ProjectedLSTMLayer, new: ProjectedLSTMLayer,
                 generator: torch.Generator) -> None:
    """Fill `new` (wider) from `old`: old cells copied gate by gate, new cells' gate
    weights uniform in a fresh layer's bound, their biases and projection rows zero."""
    H, wide_h = old.w_proj.shape[1], new.w_proj.shape[1]
    bound = (6.0 / (new.input_dim + new.w_hidden.shape[1] + 4 * wide_h)) ** 0.5
    with torch.no_grad():
        new.w_input.uniform_(-bound, bound, generator=generator)
        new.w_hidden.uniform_(-bound, bound, generator=generator)
        new.bias.zero_()
        for name in ("w_input", "w_hidden", "bias"):  # last axis: 4 gates of H cells
            source, target = getattr(old, name), getattr(new, name)
            gates = target.view(*target.shape[:-1], 4, wide_h)
            gates[..., :H] = source.view(*source.shape[:-1], 4, H)
        new.w_proj.zero_()
        new.w_proj[:, :H] = old.w_proj
