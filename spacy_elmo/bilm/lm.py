"""The biLM with its language-model head, as trained: a `BiLM` plus one shared softmax."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch
from torch import nn

from .lstm import LSTMState
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
    """Forward and backward LMs over a shared token encoder and a shared softmax.

    n_negatives: sampled words per training step; dropout: on the LSTM inputs and the top
    layer's outputs. Both have one owner, the pretraining config
    (`PretrainConfig.language_model`); `for_evaluation` needs neither."""

    def __init__(self, bilm: BiLM, n_vocab: int, *, n_negatives: int, dropout: float
                 ) -> None:
        super().__init__()
        self.bilm = bilm
        self.softmax = LMSoftmax(n_vocab, bilm.options.projection_dim)
        self.n_negatives = n_negatives
        self.dropout = nn.Dropout(dropout)
        self.set_dropout(dropout)

    @classmethod
    def for_evaluation(cls, bilm: BiLM, n_vocab: int) -> BiLanguageModel:
        """A model that only evaluates (eval mode: the full softmax, no dropout)."""
        return cls(bilm, n_vocab, n_negatives=1, dropout=0.0).eval()

    def set_dropout(self, rate: float) -> None:
        """Dropout on the LSTM inputs (the biLM's own) and on the top layer's outputs."""
        self.dropout.p = rate
        self.bilm.set_dropout(rate)

    def set_training_precision(self, precision: str) -> None:
        """Train in "fp32" or "bf16" (bf16 products over fp32 master weights: biLM and
        sampled softmax; `BiLM.set_training_precision`). Evaluation runs the biLM's
        inference precision (fp32 unless set) and the full softmax in fp32."""
        self.bilm.set_training_precision(precision)
        self.softmax.training_precision = precision

    def forward(self, batch: LMBatch, state: Optional[LSTMState] = None) -> LMOutput:
        """Sampled-softmax losses in training mode, full-softmax losses in eval mode."""
        vectors = self.bilm.encoder(batch.chars)
        vectors = torch.cat([vectors, vectors.new_zeros(1, vectors.shape[-1])])
        index = torch.where(batch.index >= 0, batch.index, vectors.shape[0] - 1)
        x = vectors[index]  # (2, rows, steps, proj)
        outputs, final = self.bilm.lstm(x[0], x[1], batch.lengths, state)
        top = self.dropout(outputs[-1])
        hidden = top.reshape(-1, top.shape[-1])
        targets = batch.targets.reshape(-1)
        if self.training:
            nll = self.softmax.sampled_nll(hidden, targets, n_negatives=self.n_negatives)
        else:
            nll = self.softmax.full_nll(hidden, targets)
        per_direction = nll.view(2, -1).sum(-1)
        counts = (batch.targets >= 0).sum(dim=(1, 2)).tolist()
        return LMOutput(per_direction[0], per_direction[1], counts[0], counts[1], final)

