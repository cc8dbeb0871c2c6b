"""Response bodies: the media type an Accept header chooses, and the answers as JSON, a
.npy file or raw float32.

Binary answers hold every sentence's vectors in one array, concatenated along the token
axis: (L+1, total_tokens, width) for layers "all", else (total_tokens, width); the
`X-Elmo-Lengths` header gives each sentence's token count (in order) to split it again,
`X-Elmo-Shape` the array's shape. Raw bodies are little-endian float32 in C order.
"""

from __future__ import annotations

import io
import json
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..errors import Errors
from .inputs import ClientError
from .served import Embedded, Parsed

JSON = "application/json"
NPY = "application/x-npy"
RAW = "application/octet-stream"
EMBED_TYPES = (JSON, NPY, RAW)
JSON_ONLY = (JSON,)


def negotiate(accept: Optional[str], offered: Sequence[str]) -> str:
    """The offered media type the Accept header gives the highest quality (each type takes
    the q of the most specific range that matches it; ties go to the order of `offered`);
    the first one without a header. E212 (406) when it accepts none of them."""
    if accept is None or not accept.strip():
        return offered[0]
    ranges: List[Tuple[str, float]] = []
    for part in accept.split(","):
        media, *params = (p.strip().lower() for p in part.split(";"))
        q = 1.0
        for param in params:
            name, _, value = param.partition("=")
            if name.strip() == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
        ranges.append((media, q))
    best: Optional[Tuple[float, int]] = None
    for order, offer in enumerate(offered):
        matches = [(_specificity(media, offer), q) for media, q in ranges]
        specific, q = max((m for m in matches if m[0] >= 0), default=(-1, 0.0))
        if specific >= 0 and q > 0 and (best is None or q > best[0]):
            best = (q, order)
    if best is None:
        raise ClientError(Errors.E212.format(offered=", ".join(offered), accept=accept), 406)
    return offered[best[1]]


def _specificity(media: str, offer: str) -> int:
    """2: the type itself, 1: its type/*, 0: */*, -1: no match."""
    if media == offer:
        return 2
    if media == "*/*":
        return 0
    if media.endswith("/*") and offer.startswith(media[:-1]):
        return 1
    return -1


def json_body(value: Any) -> bytes:
    """Compact JSON; float32 values round-trip exactly (Python's shortest repr of their
    float64 value)."""
    return json.dumps(value, ensure_ascii=False, allow_nan=False,
                      separators=(",", ":")).encode("utf-8")


def json_array(array: np.ndarray) -> List[bytes]:
    """`json_body(array.tolist())` in parts, a row each: the same bytes, made without
    holding the interpreter for the whole array (a 4,096 x 256 answer takes about a second
    to write), so that the event loop and the model's thread go on meanwhile."""
    if array.ndim <= 1:
        return [json_body(array.tolist())]
    parts = [b"["]
    for i, row in enumerate(array):
        if i:
            parts.append(b",")
        parts += json_array(row)
    parts.append(b"]")
    return parts


def check_json_values(n: int, limit: int) -> None:
    """E271 (413) for a JSON answer of more than `limit` numbers."""
    if n > limit:
        raise ClientError(Errors.E271.format(n=n, limit=limit), 413)


def embed_body(answer: Embedded, media: str, max_json_values: int
               ) -> Tuple[bytes, Dict[str, str]]:
    """The body and headers of a /v1/embed answer in `media` (E271 for JSON of more than
    `max_json_values` numbers)."""
    if media == JSON:
        check_json_values(sum(a.size for a in answer.arrays), max_json_values)
        parts = [b'{"layers":', json_body(answer.layers), b',"width":',
                 json_body(answer.width), b',"embeddings":[']
        for i, array in enumerate(answer.arrays):
            if i:
                parts.append(b",")
            parts += json_array(array)
        parts.append(b"]")
        if answer.tokens is not None:
            parts += [b',"tokens":', json_body(answer.tokens)]
        parts.append(b"}")
        return b"".join(parts), {}
    array = np.concatenate(answer.arrays, axis=-2).astype("<f4", copy=False)
    headers = {"X-Elmo-Lengths": ",".join(str(a.shape[-2]) for a in answer.arrays),
               "X-Elmo-Shape": ",".join(str(n) for n in array.shape),
               "X-Elmo-Layers": answer.layers}
    if media == NPY:
        buffer = io.BytesIO()
        np.save(buffer, array, allow_pickle=False)
        return buffer.getvalue(), headers
    return np.ascontiguousarray(array).tobytes(), headers


def parse_body(answer: Parsed, max_json_values: int) -> bytes:
    """A /v1/parse answer (E271 when its vectors are more than `max_json_values` numbers)."""
    if answer.vectors is not None:
        check_json_values(sum(v.size for v in answer.vectors if v is not None),
                          max_json_values)
    docs: List[Dict[str, Any]] = []
    for i, doc in enumerate(answer.docs):
        item: Dict[str, Any] = {"doc": doc}
        if answer.vectors is not None:
            vectors = answer.vectors[i]
            item["elmo"] = None if vectors is None else vectors.tolist()
        docs.append(item)
    return json_body({"docs": docs})

