"""A bounded cache of frozen-biLM outputs per sentence, kept across training epochs."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Iterable, Optional, Tuple

from thinc.api import Model, deserialize_attr, serialize_attr

from ..bilm.stamp import weights_stamp
from .serialize import restore_configured


class OutputCache:
    """Sentence (tuple of token texts) -> biLM layers, least recently used dropped first.

    Bounded by `max_mb` of array memory. Emptied whenever the biLM's weights change (see
    `validate`). Never serialised or pickled with its contents: a copied or loaded model
    starts with an empty cache.
    """

    def __init__(self, max_mb: float) -> None:
        self.max_bytes = int(max_mb * 2**20)
        self._entries: OrderedDict[Tuple[str, ...], Any] = OrderedDict()
        self._stamp: Optional[Tuple] = None
        self.n_bytes = 0
        self.hits = 0
        self.misses = 0

    def validate(self, generation: int, parameters: Iterable[Any]) -> None:
        """Drop every entry if the weights changed since the last call: an optimizer step
        (`generation`), or parameters modified, replaced or moved by torch."""
        stamp = (generation, weights_stamp(parameters))
        if stamp != self._stamp:
            self.clear()
            self._stamp = stamp

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: Tuple[str, ...]) -> Optional[Any]:
        value = self._entries.get(key)
        if value is None:
            self.misses += 1
            return None
        self.hits += 1
        self._entries.move_to_end(key)
        return value

    def put(self, key: Tuple[str, ...], value: Any) -> None:
        if self.max_bytes <= 0 or value.nbytes > self.max_bytes or key in self._entries:
            return
        self._entries[key] = value
        self.n_bytes += value.nbytes
        while self.n_bytes > self.max_bytes:
            _, old = self._entries.popitem(last=False)
            self.n_bytes -= old.nbytes

    def clear(self) -> None:
        self._entries.clear()
        self.n_bytes = 0

    def __getstate__(self) -> dict:
        return {"max_bytes": self.max_bytes}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["max_bytes"] / 2**20)  # type: ignore[misc]


@serialize_attr.register(OutputCache)
def _serialize_cache(_: OutputCache, value: OutputCache, name: str, model: Model) -> bytes:
    return str(value.max_bytes).encode("ascii")


@deserialize_attr.register(OutputCache)
def _deserialize_cache(_: OutputCache, value: bytes, name: str, model: Model) -> OutputCache:
    """The saved cache size, unless the model was built with configured settings: the
    output cache is the last attr an ElmoModel saves, so the configured ones are put back
    here over every saved one (`serialize.ConfiguredAttrs`)."""
    model.attrs["output_cache"] = OutputCache(int(value.decode("ascii")) / 2**20)
    restore_configured(model)
    return model.attrs["output_cache"]
