"""What changes when a parameter changes: the one version of a module's weights that every
cache of values computed from them compares within a process (`WeightsVersion`), the digest
of the weights' content that files made from them record across processes
(`content_digest`), and the cache of weight copies (int8, bf16) kept by that version
(`DerivedCopies`)."""

from __future__ import annotations

import itertools
from typing import Any, Callable, Dict, Iterable, Optional, Tuple, TypeVar, cast

import torch

from ..checksums import content_sha256

T = TypeVar("T")
_COUNTER = itertools.count(1)  # versions are unique within a process, across modules


def weights_stamp(parameters: Iterable[torch.Tensor]) -> Tuple:
    """Changes whenever a parameter is modified in place, replaced, moved or cast (torch's
    version counters and storage); caches compare it to know their entries are stale.

    Inference tensors (made under torch.inference_mode(), e.g. by `.to()` there) have no
    version counter; for them the stamp sees replacement, moves and casts only."""
    return tuple((p.data_ptr(), None if p.is_inference() else p._version, p.dtype, p.device)
                 for p in parameters)


class WeightsVersion:
    """The version of a module's weights, the key every cache of values computed from them
    compares (word cache, int8 and bf16 copies, the component's output cache): a counter
    that `bump()` moves for changes torch does not see (thinc's optimizer steps, another
    precision, a load), and torch's own stamp of the parameters (in-place writes,
    replacement, moves, casts). A biLM owns one and shares it with its parts."""

    def __init__(self, module: torch.nn.Module) -> None:
        self.module = module
        self.bump()

    def bump(self) -> None:
        self.count = next(_COUNTER)

    def key(self) -> Tuple:
        return (self.count, weights_stamp(self.module.parameters()))


def content_digest(module: torch.nn.Module, extra: Any = None) -> str:
    """A SHA-256 of what `module` computes with: every tensor of its state (parameters and
    buffers, by name, dtype, shape and bytes) and `extra` (settings that are no tensor, such
    as a biLM's options). The same weights give the same digest wherever they were loaded
    from; any changed value gives another (the key of embed's shard files)."""
    return content_sha256({"state": dict(module.state_dict()), "extra": extra})


class DerivedCopies:
    """Copies made from parameters (int8 or bf16 weights), kept until the weights' version
    changes or another kind is asked for. Not pickled: remade where used."""

    def __init__(self) -> None:
        self._key: Optional[Tuple] = None
        self._value: Any = None

    def get(self, kind: str, version: WeightsVersion, make: Callable[[], T]) -> T:
        """The copies of `kind`, made by `make()` when the kept ones are stale."""
        key = (kind, version.key())
        if key != self._key:
            self._value, self._key = None, None  # the stale copies go before new ones come
            self._value, self._key = make(), key
        return cast(T, self._value)

    def __getstate__(self) -> Dict[str, Any]:
        return {"_key": None, "_value": None}
