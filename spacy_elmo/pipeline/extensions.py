"""`Doc._.elmo`, `Doc._.elmo_layers`, `Token._.elmo`, `Span._.elmo`, and the vector hooks."""

from __future__ import annotations

from typing import Any, Optional, Union

import numpy as np
from spacy.tokens import Doc, Span, Token

from ..errors import ElmoError, Errors


def register_extensions() -> None:
    """Register the extension attributes once (safe to call again)."""
    if not Doc.has_extension("elmo"):
        Doc.set_extension("elmo", default=None)
    if not Doc.has_extension("elmo_layers"):
        Doc.set_extension("elmo_layers", default=None)
    if not Token.has_extension("elmo"):
        Token.set_extension("elmo", getter=token_elmo)
    if not Span.has_extension("elmo"):
        Span.set_extension("elmo", getter=span_elmo)


def aligned(doc: Doc) -> Optional[np.ndarray]:
    """`doc._.elmo`, checked to have one row per token (E051 after a retokenization)."""
    vectors = doc._.elmo
    if vectors is not None and vectors.shape[0] != len(doc):
        raise ElmoError(Errors.E051.format(n=len(doc), n_vectors=vectors.shape[0]))
    return vectors


def token_elmo(token: Token) -> Optional[np.ndarray]:
    vectors = aligned(token.doc)
    return None if vectors is None else vectors[token.i]


def span_elmo(span: Span) -> Optional[np.ndarray]:
    """The mean of the span's token vectors (zeros for an empty span)."""
    vectors = aligned(span.doc)
    if vectors is None:
        return None
    if span.end == span.start:
        return np.zeros(vectors.shape[1], dtype=vectors.dtype)
    return vectors[span.start : span.end].mean(axis=0)


def _vectors_of(doc: Doc) -> np.ndarray:
    vectors = aligned(doc)
    if vectors is None:
        raise ElmoError(Errors.E055)
    return vectors


def doc_elmo_mean(doc: Doc) -> np.ndarray:
    vectors = _vectors_of(doc)
    if len(doc) == 0:
        return np.zeros(vectors.shape[1], dtype="float32")
    return vectors.mean(axis=0)


def _has(obj: Union[Doc, Span, Token]) -> bool:
    doc = obj if isinstance(obj, Doc) else obj.doc
    return doc._.elmo is not None


def _norm(vector: Any) -> float:
    return float(np.sqrt((vector * vector).sum()))


def elmo_vector(obj: Union[Doc, Span, Token]) -> np.ndarray:
    """The ELMo vector of a doc (mean of its tokens), span (the same) or token, read from
    the doc's ELMo vectors, not from `.vector` (which a doc without this package's hooks,
    e.g. one restored from a DocBin, answers with static vectors); E055 without them."""
    if isinstance(obj, Doc):
        return doc_elmo_mean(obj)
    if isinstance(obj, Span):
        return _span_vector(obj)
    return _token_vector(obj)


def _similarity(a: Union[Doc, Span, Token], b: Union[Doc, Span, Token]) -> float:
    """Cosine of the ELMo vectors; both sides need them (E055), as a static vector is no
    match for a contextual one."""
    va, vb = elmo_vector(a), elmo_vector(b)
    na, nb = _norm(va), _norm(vb)
    return 0.0 if na == 0 or nb == 0 else float(np.dot(va, vb) / (na * nb))


def _span_vector(span: Span) -> np.ndarray:
    _vectors_of(span.doc)
    return span._.elmo


def _token_vector(token: Token) -> np.ndarray:
    return _vectors_of(token.doc)[token.i]


def _vector_norm(obj: Union[Doc, Span, Token]) -> float:
    return _norm(obj.vector)


def install_vector_hooks(doc: Doc) -> None:
    """Make `.vector`, `.vector_norm`, `.has_vector` and `.similarity()` use ELMo vectors.

    Spans get no `vector_norm` hook: spaCy (3.8) answers `Span.vector_norm` with the
    `vector` hook whenever a `vector_norm` hook exists, and without one computes the norm
    of `Span.vector`, which is the ELMo vector through the `vector` hook."""
    doc.user_hooks.update({"vector": doc_elmo_mean, "has_vector": _has,
                           "vector_norm": _vector_norm, "similarity": _similarity})
    doc.user_span_hooks.update({"vector": _span_vector, "has_vector": _has,
                                "similarity": _similarity})
    doc.user_token_hooks.update({"vector": _token_vector, "has_vector": _has,
                                 "vector_norm": _vector_norm, "similarity": _similarity})
