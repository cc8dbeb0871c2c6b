"""The biLM with its language-model head, as trained: a `BiLM` plus one shared softmax."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple

import torch
from torch import nn

from .lstm import BiLSTMStack, LSTMState
from .model import BiLM
from .softmax import LMSoftmax


@dataclass
class LMBatch:
    """One window of every batch row, in both directions.

    chars: (n_unique, max_chars) shifted char ids of the distinct tokens in the window.
    index: (2, rows, steps) position of each input token in `chars`; -1 pads a finished row.
    targets: (2, rows, steps) softmax ids of the next token in each direction's reading
    order; -1 where there is none. lengths: (rows,) real steps per row (same in both
    directions). [0] is the forward stream, [1] the reversed (backward) stream.
    """

    chars: torch.Tensor
    index: torch.Tensor
    targets: torch.Tensor
    lengths: torch.Tensor

    def to(self, device: torch.device) -> LMBatch:
        return LMBatch(self.chars.to(device), self.index.to(device), self.targets.to(device),
                       self.lengths.to(device))

    @property
    def n_targets(self) -> int:
        return int((self.targets >= 0).sum())


@dataclass
class LMOutput:
    """Summed losses per direction (forward, backward), target counts, and the final state."""

    loss_fwd: torch.Tensor
    loss_bwd: torch.Tensor
    n_fwd: int
    n_bwd: int
    state: LSTMState

    @property
    def mean_loss(self) -> torch.Tensor:
        """Mean per-token loss of the two directions (the training objective)."""
        return 0.5 * (self.loss_fwd / max(self.n_fwd, 1) + self.loss_bwd / max(self.n_bwd, 1))


class BiLanguageModel(nn.Module):
    """Forward and backward LMs over a shared token encoder and a shared softmax."""

    def __init__(self, bilm: BiLM, n_vocab: int, *, n_negatives: int = 8192,
                 dropout: float = 0.1) -> None:
        super().__init__()
        self.bilm = bilm
        self.softmax = LMSoftmax(n_vocab, bilm.options.projection_dim)
        self.n_negatives = n_negatives
        self.dropout = nn.Dropout(dropout)
        bilm.set_dropout(dropout)

    def forward(self, batch: LMBatch, state: Optional[LSTMState] = None) -> LMOutput:
        """Sampled-softmax losses in training mode, full-softmax losses in eval mode."""
        vectors = self.bilm.encoder(batch.chars)
        vectors = torch.cat([vectors, vectors.new_zeros(1, vectors.shape[-1])])
        index = torch.where(batch.index >= 0, batch.index, vectors.shape[0] - 1)
        x = vectors[index]  # (2, rows, steps, proj)
        if bool((batch.lengths == x.shape[2]).all()):
            top, final = full_window_lstm(self.bilm.lstm, x, state)
        else:
            outputs, final = self.bilm.lstm(x[0], x[1], batch.lengths, state)
            top = outputs[-1]
        top = self.dropout(top)
        hidden = top.reshape(-1, top.shape[-1])
        targets = batch.targets.reshape(-1)
        if self.training:
            nll = self.softmax.sampled_nll(hidden, targets, n_negatives=self.n_negatives)
        else:
            nll = self.softmax.full_nll(hidden, targets)
        per_direction = nll.view(2, -1).sum(-1)
        counts = (batch.targets >= 0).sum(dim=(1, 2)).tolist()
        return LMOutput(per_direction[0], per_direction[1], counts[0], counts[1], final)


def full_window_lstm(stack: BiLSTMStack, x: torch.Tensor, state: Optional[LSTMState]
                     ) -> Tuple[torch.Tensor, LSTMState]:
    """The top layer of `stack` for windows where every row runs all steps: the same maths
    as `BiLSTMStack.forward` (TF gate order, forget bias, clipping, residuals, dropout on
    each layer's input), without the per-row bookkeeping, and with the input projections
    split per timestep once (slicing them per step costs a full-size gradient each step).

    x: (2, rows, steps, proj) -> (2, rows, steps, proj), final state.
    """
    _, rows, steps, _ = x.shape
    if state is None:
        state = LSTMState.zeros(stack.options, rows, x.device, x.dtype)
    inputs = x.transpose(1, 2)  # (2, steps, rows, proj)
    final_h, final_c = [], []
    for k, layer in enumerate(stack.layers):
        dropped = stack.dropout(inputs)
        hidden = layer.w_proj.shape[1]
        bias = (layer.bias + layer.forget_bias)[:, None, :]
        gates_x = torch.baddbmm(bias, dropped.reshape(2, steps * rows, -1), layer.w_input)
        h, c = state.h[k], state.c[k]
        outputs = []
        for gates_t in gates_x.view(2, steps, rows, 4 * hidden).unbind(1):
            i, j, f, o = torch.baddbmm(gates_t, h, layer.w_hidden).chunk(4, dim=-1)
            c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(j)
            if layer.cell_clip is not None:
                c = c.clamp(-layer.cell_clip, layer.cell_clip)
            h = torch.bmm(torch.sigmoid(o) * torch.tanh(c), layer.w_proj)
            if layer.proj_clip is not None:
                h = h.clamp(-layer.proj_clip, layer.proj_clip)
            outputs.append(h)
        out = torch.stack(outputs, dim=1)
        if k > 0 and stack.options.use_skip_connections:
            out = out + dropped
        final_h.append(h)
        final_c.append(c)
        inputs = out
    return inputs.transpose(1, 2), LSTMState(torch.stack(final_h), torch.stack(final_c))
