"""What changes when a parameter changes: the key that caches of computed values compare."""

from __future__ import annotations

from typing import Iterable, Tuple

import torch


def weights_stamp(parameters: Iterable[torch.Tensor]) -> Tuple:
    """Changes whenever a parameter is modified in place, replaced, moved or cast (torch's
    version counters and storage); caches compare it to know their entries are stale.

    Inference tensors (made under torch.inference_mode(), e.g. by `.to()` there) have no
    version counter; for them the stamp sees replacement, moves and casts only."""
    return tuple((p.data_ptr(), None if p.is_inference() else p._version, p.dtype, p.device)
                 for p in parameters)
