"""The torch module inside an ElmoModel's PyTorchWrapper: its settings, and its biLM once
weights are loaded."""

from __future__ import annotations

from typing import Optional, Tuple

import torch

from ..bilm import BiLM, CharIds
from .settings import ElmoSettings


class BiLMHolder(torch.nn.Module):
    """The torch side of the wrapper: the model's settings, and a BiLM once loaded (with
    the settings applied). `gradients_seen` is the gradients' stamp at the last run
    (`elmo_model._note_gradients`). It lives in the shim, so thinc's copies of the model
    copy it whole."""

    def __init__(self, settings: ElmoSettings) -> None:
        super().__init__()
        self.settings = settings
        self.bilm: Optional[BiLM] = None
        self.char_ids: Optional[CharIds] = None
        self.gradients_seen: Tuple = ()

    def put(self, bilm: BiLM) -> None:
        """Hold `bilm` (already on its device), with the settings applied."""
        self.settings.apply(bilm)
        self.bilm = bilm
        self.char_ids = bilm.token_ids()

    def forward(self, char_ids: torch.Tensor) -> torch.Tensor:
        assert self.bilm is not None
        return self.bilm(char_ids).layers
