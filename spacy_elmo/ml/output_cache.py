"""An ElmoModel's attrs: a bounded cache of frozen-biLM outputs per sentence, kept across
training epochs, and the settings 1.0 saved as attrs, read and dropped (`Retired`)."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Optional, Tuple

from thinc.api import Model, deserialize_attr, serialize_attr

OUTPUT_CACHE = "output_cache"  # the ElmoModel attr that holds it


class OutputCache:
    """Sentence (tuple of token texts) -> biLM layers, least recently used dropped first.

    Bounded by `max_mb` of array memory. Emptied whenever the biLM's weights version changes
    (see `validate`). Never saved, and never pickled with its contents: a copied or loaded
    model starts with an empty cache of its configured size.
    """

    def __init__(self, max_mb: float) -> None:
        self.max_mb = max_mb
        self.max_bytes = int(max_mb * 2**20)
        self._entries: OrderedDict[Tuple[str, ...], Any] = OrderedDict()
        self._stamp: Optional[Tuple] = None
        self.n_bytes = 0
        self.hits = 0
        self.misses = 0

    def validate(self, version: Tuple) -> None:
        """Drop every entry if the biLM's weights version (`WeightsVersion.key()`) is not
        the one of the last call."""
        if version != self._stamp:
            self.clear()
            self._stamp = version

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
        return {"max_mb": self.max_mb}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["max_mb"])  # type: ignore[misc]


@serialize_attr.register(OutputCache)
def _serialize_cache(_: OutputCache, value: OutputCache, name: str, model: Model) -> bytes:
    raise TypeError  # never saved: thinc leaves out an attr whose serializer raises this


@deserialize_attr.register(OutputCache)
def _deserialize_cache(default: OutputCache, value: bytes, name: str, model: Model
                       ) -> OutputCache:
    """The configured cache, whatever size a 1.0 pipeline saved."""
    return default


class Retired:
    """The value of an attr that 1.0 saved with every ElmoModel (its settings, now
    `ElmoSettings`, which the config alone sets): read from such data and dropped, never
    saved."""


RETIRED = ("batch_size", "max_batch_tokens", "max_sentence_tokens", "word_cache_size",
           "dropout", "precision")


@serialize_attr.register(Retired)
def _serialize_retired(_: Retired, value: Retired, name: str, model: Model) -> bytes:
    raise TypeError  # never saved


@deserialize_attr.register(Retired)
def _deserialize_retired(default: Retired, value: bytes, name: str, model: Model) -> Retired:
    return default
