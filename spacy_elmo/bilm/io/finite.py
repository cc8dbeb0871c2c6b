"""Weights read from a file are checked to be finite: a NaN or an infinity would otherwise
pass silently into every vector (and into training, with `pretrain --init-weights`)."""

from __future__ import annotations

from typing import Any, Dict, Mapping

import numpy as np
import torch

from ...errors import ElmoError, Errors
from ...files import PathLike


def check_finite(path: PathLike, arrays: Mapping[str, Any]) -> None:
    """E046 when arrays (numpy arrays or torch tensors) read from `path` hold NaN or
    infinity, naming the first such one with its count of non-finite values, and how many
    others have some. One pass over each array; integer arrays are skipped."""
    bad: Dict[str, int] = {}
    for name, array in arrays.items():
        if isinstance(array, torch.Tensor):
            if not array.is_floating_point():
                continue
            n_finite = int(torch.isfinite(array).sum())
            size = array.numel()
        else:
            if not np.issubdtype(array.dtype, np.floating):
                continue
            n_finite = int(np.count_nonzero(np.isfinite(array)))
            size = array.size
        if n_finite != size:
            bad[name] = size - n_finite
    if bad:
        name, n = next(iter(bad.items()))
        more = "" if len(bad) == 1 else f" and in {len(bad) - 1} other array(s)"
        raise ElmoError(Errors.E046.format(path=path, n=n, name=name, more=more))
