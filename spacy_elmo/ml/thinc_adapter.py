"""The one place that relies on what thinc does not document; each reliance is named here
with its reason, and `tests/pipeline/test_thinc_adapter.py` fails when thinc changes one.

1. `PyTorchShim._model`, the torch module a `PyTorchWrapper_v3` model holds: thinc has no
   public accessor, and the module must be read from the shim each time, since it is the
   only home of the biLM that stays right when thinc copies the model (`Model.copy()` copies
   the shim and its module; a reference kept elsewhere would name the original).
2. `PyTorchShim.finish_update` writes each optimizer step into the parameters' memory, which
   torch's version counters do not see, and then resets the stepped parameters' gradients
   in place (`grad.zero_()`): the gradients' stamp is what tells the caches that a step may
   have changed the weights.
"""

from __future__ import annotations

from typing import Tuple

import torch
from thinc.api import Model


def torch_module(wrapper: Model) -> torch.nn.Module:
    """The torch module inside a `PyTorchWrapper_v3` model (reliance 1)."""
    module = wrapper.shims[0]._model
    assert isinstance(module, torch.nn.Module)
    return module


def gradients_stamp(module: torch.nn.Module) -> Tuple:
    """Changes whenever a backward pass writes `module`'s gradients and whenever thinc's
    optimizer step resets them (reliance 2): each gradient's storage and version counter;
    () while no parameter has a gradient."""
    return tuple((i, p.grad.data_ptr(), p.grad._version)
                 for i, p in enumerate(module.parameters()) if p.grad is not None)
