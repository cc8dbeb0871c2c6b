"""What changes when a parameter changes: the key that caches of computed values compare
within a process (`weights_stamp`), and the digest of the weights' content that files made
from them record across processes (`content_digest`); and the cache of weight copies
(int8, bf16) kept by that key (`DerivedCopies`)."""

from __future__ import annotations

from typing import Any, Callable, Dict, Iterable, Optional, Sequence, Tuple, TypeVar, cast

import torch

from ..checksums import content_sha256

T = TypeVar("T")


def weights_stamp(parameters: Iterable[torch.Tensor]) -> Tuple:
    """Changes whenever a parameter is modified in place, replaced, moved or cast (torch's
    version counters and storage); caches compare it to know their entries are stale.

    Inference tensors (made under torch.inference_mode(), e.g. by `.to()` there) have no
    version counter; for them the stamp sees replacement, moves and casts only."""
    return tuple((p.data_ptr(), None if p.is_inference() else p._version, p.dtype, p.device)
                 for p in parameters)


def content_digest(module: torch.nn.Module, extra: Any = None) -> str:
    """A SHA-256 of what `module` computes with: every tensor of its state (parameters and
    buffers, by name, dtype, shape and bytes) and `extra` (settings that are no tensor, such
    as a biLM's options). The same weights give the same digest wherever they were loaded
    from; any changed value gives another (the key of embed's shard files)."""
    return content_sha256({"state": dict(module.state_dict()), "extra": extra})


class DerivedCopies:
    """Copies made from parameters (int8 or bf16 weights), kept until the parameters change
    (their stamp), another kind is asked for, or `clear()`. Not pickled: remade where used."""

    def __init__(self) -> None:
        self._key: Optional[Tuple] = None
        self._value: Any = None

    def get(self, kind: str, parameters: Sequence[torch.Tensor], make: Callable[[], T]) -> T:
        """The copies of `kind`, made by `make()` when the kept ones are stale."""
        key = (kind, weights_stamp(parameters))
        if key != self._key:
            self._value, self._key = None, None  # the stale copies go before new ones come
            self._value, self._key = make(), key
        return cast(T, self._value)

    def clear(self) -> None:
        self._key, self._value = None, None

    def __getstate__(self) -> Dict[str, Any]:
        return {"_key": None, "_value": None}
