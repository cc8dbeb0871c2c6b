"""The one place checksums are computed: SHA-256 over what the project saves, so that damage
to a file is found when it is read back (and a served biLM is known by its weights)."""

from __future__ import annotations

import hashlib
from typing import Any, Dict

import numpy as np
import torch

# The values a checksum is stored under end so; the content checksum leaves them out.
SUFFIX = "_sha256"


def bytes_sha256(data: bytes) -> str:
    """Over raw bytes (a saved biLM's `torch.save` state: `state_sha256`)."""
    return hashlib.sha256(data).hexdigest()


def content_sha256(data: Dict[str, Any]) -> str:
    """Over a canonical walk of a dict, less its top-level checksums (keys ending in
    `_sha256`): containers with their type and length, dict items in key order, tensors by
    dtype, shape and bytes, other values by type and an exact text form (a pretraining
    checkpoint's `content_sha256`)."""
    digest = hashlib.sha256()
    _walk(digest, {k: v for k, v in data.items() if not str(k).endswith(SUFFIX)})
    return digest.hexdigest()


def _walk(digest: Any, value: Any) -> None:
    """Feed one value into `digest` (see `content_sha256`)."""
    if isinstance(value, torch.Tensor):
        digest.update(f"T{value.dtype}{tuple(value.shape)};".encode())
        digest.update(_tensor_bytes(value))
    elif isinstance(value, dict):
        digest.update(f"{type(value).__name__}{len(value)};".encode())
        for key in sorted(value, key=lambda k: (type(k).__name__, str(k))):
            _leaf(digest, key)
            _walk(digest, value[key])
        extra = getattr(value, "__dict__", None)  # e.g. a state_dict's `_metadata`
        if extra:
            _walk(digest, dict(extra))
    elif isinstance(value, (list, tuple)):
        digest.update(f"{type(value).__name__}{len(value)};".encode())
        for item in value:
            _walk(digest, item)
    else:
        _leaf(digest, value)


def _tensor_bytes(value: torch.Tensor) -> memoryview:
    """A tensor's data as raw bytes, in row-major order, on the CPU."""
    return value.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy().data


def _leaf(digest: Any, value: Any) -> None:
    """Feed a value that holds no others into `digest`, with its type and length."""
    if isinstance(value, str):
        raw = value.encode("utf-8", "surrogatepass")
    elif isinstance(value, bytes):
        raw = value
    elif isinstance(value, float):
        raw = value.hex().encode()
    else:  # None, bool, int, and the few other types torch's weights_only loading allows
        raw = repr(value).encode()
    digest.update(f"{type(value).__name__}{len(raw)}:".encode())
    digest.update(raw)


def tensors_sha256(data: Any) -> str:
    """Over every tensor in `data` (dicts, lists), with its place, dtype and shape; other
    values are not included (a served biLM's `checksum`)."""
    digest = hashlib.sha256()

    def walk(value: Any, where: str) -> None:
        if isinstance(value, torch.Tensor):
            digest.update(f"{where}:{value.dtype}:{tuple(value.shape)};".encode())
            digest.update(_tensor_bytes(value))
        elif isinstance(value, dict):
            for key in sorted(value, key=str):
                if not str(key).endswith(SUFFIX):
                    walk(value[key], f"{where}/{key}")
        elif isinstance(value, (list, tuple)):
            for i, item in enumerate(value):
                walk(item, f"{where}/{i}")

    walk(data, "")
    return digest.hexdigest()


class ArraysDigest:
    """SHA-256 over named arrays and texts fed one by one, each with its name, dtype and
    shape (an embed shard's `data_sha256`: its datasets in line order, then its index)."""

    def __init__(self) -> None:
        self._digest = hashlib.sha256()

    def add(self, name: str, array: np.ndarray) -> None:
        array = np.ascontiguousarray(array)
        _leaf(self._digest, name)
        self._digest.update(f"A{array.dtype.str}{array.shape};".encode())
        self._digest.update(array.reshape(-1).view(np.uint8).data)

    def add_text(self, name: str, text: str) -> None:
        _leaf(self._digest, name)
        _leaf(self._digest, text)

    def hexdigest(self) -> str:
        return self._digest.hexdigest()
