"""The torch module inside an ElmoModel's PyTorchWrapper: empty until weights are loaded."""

from __future__ import annotations

from typing import Optional, Tuple

import torch

from ..bilm import BiLM, CharIds


class BiLMHolder(torch.nn.Module):
    """The torch side of the wrapper: empty until weights are loaded, then a BiLM.

    `generation` counts changes of the biLM's weights by optimizer steps (fine-tuning),
    loading and precision changes, for the caches; `gradients_seen` is the gradients' stamp
    at the last run (`elmo_model._note_gradients`).
    """

    def __init__(self) -> None:
        super().__init__()
        self.bilm: Optional[BiLM] = None
        self.char_ids: Optional[CharIds] = None
        self.generation = 0
        self.gradients_seen: Tuple = ()

    def forward(self, char_ids: torch.Tensor) -> torch.Tensor:
        assert self.bilm is not None
        return self.bilm(char_ids).layers
