"""Request bodies checked into jobs for the model: size, encoding, JSON, the schema, then
what the schema cannot say (tokens, texts, counts, the mix). A problem is a `ClientError`
with the HTTP status it answers with and a message of the catalogue; nothing a request holds
names a file or reaches the model unchecked."""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Type, TypeVar
from unicodedata import east_asian_width

import numpy as np
from pydantic import BaseModel, ValidationError

from ..bilm.windows import Piece
from ..errors import ElmoError, Errors
from .limits import Limits
from .schemas import EmbedRequest, ParseRequest

M = TypeVar("M", bound=BaseModel)
BOM = "\ufeff"
LANG = re.compile(r"[a-z]{2,3}")
MAX_SHOWN = 5  # schema problems named in one message
FLOAT32_MAX = 3.4028234663852886e38


class ClientError(ElmoError):
    """A request the server refuses: HTTP `status`, and whether the connection is closed
    after the answer (the body was not read to its end)."""

    def __init__(self, message: str, status: int, *, close: bool = False) -> None:
        super().__init__(message)
        self.status = status
        self.close = close

    @property
    def code(self) -> str:
        return str(self)[1:5]

    def body(self) -> Dict[str, Any]:
        """Its answer's JSON: `{"error": {"code", "message", "status"}}`."""
        return {"error": {"code": self.code, "message": str(self), "status": self.status}}

    def headers(self) -> Dict[str, str]:
        """Its answer's headers: its code; `Connection: close` when the connection closes;
        `Retry-After` on a 503."""
        headers = {"Connection": "close"} if self.close else {}
        headers["X-Elmo-Error"] = self.code
        if self.status == 503:
            headers["Retry-After"] = "1"
        return headers


@dataclass
class EmbedJob:
    """What one /v1/embed request asks the biLM: `sentences` (tokens) or `texts`."""

    layers: str
    sentences: Optional[List[List[str]]] = None
    texts: Optional[List[str]] = None
    lang: Optional[str] = None
    mix_weights: Optional[List[float]] = None
    gamma: Optional[float] = None
    max_tokens: int = Limits.max_tokens  # the limit once texts are tokenized
    # the model's thread's (Served.measure and run): the texts' tokens, the windows the job
    # runs as, the outputs of its sentences so far, and its next step's windows
    tokens: Optional[List[List[str]]] = None
    pieces: Optional[List[Piece]] = None
    outputs: List[Optional[np.ndarray]] = field(default_factory=list)
    done: int = 0
    step_end: int = 0

    def sentence(self, i: int) -> Sequence[str]:
        sentences = self.sentences if self.sentences is not None else self.tokens
        assert sentences is not None  # texts are tokenized before their windows are cut
        return sentences[i]

    @property
    def cost(self) -> int:
        """Tokens with <S> and </S> (estimated for texts: the batcher measures them)."""
        if self.sentences is not None:
            return sum(len(s) + 2 for s in self.sentences)
        return sum(text_cost(t, self.max_tokens) + 2 for t in self.texts or [])


@dataclass
class ParseJob:
    """What one /v1/parse request asks the pipeline."""

    texts: List[str]
    elmo: bool = False
    max_tokens: int = Limits.max_tokens

    @property
    def cost(self) -> int:
        return sum(text_cost(t, self.max_tokens) + 2 for t in self.texts)


def text_tokens_at_least(text: str) -> int:
    """A lower bound of a text's tokens: spaCy's tokenizers split at whitespace, and
    further."""
    return len(text.split())


def text_cost(text: str, max_tokens: int) -> int:
    """A text's tokens as batching estimates them before tokenizing: a whitespace-separated
    word each, or each of its wide characters (CJK and other scripts written without spaces,
    which spaCy's tokenizers for them split about a character a token); at most `max_tokens`
    (a text with more is refused once tokenized)."""
    tokens = 0
    for word in text.split():
        wide = sum(1 for ch in word if ord(ch) >= 0x1100 and east_asian_width(ch) in "WF")
        tokens += max(wide, 1)
        if tokens >= max_tokens:
            return max_tokens
    return tokens


def check_content_type(value: Optional[str]) -> None:
    """E213 unless the body is declared JSON (or not declared), in UTF-8."""
    if not value or not value.strip():
        return
    media, *params = (part.strip().lower() for part in value.split(";"))
    charset = next((p.partition("=")[2].strip('"') for p in params
                    if p.partition("=")[0].strip() == "charset"), "utf-8")
    if not (media == "application/json" or media.endswith("+json")) or charset not in (
            "utf-8", "utf8"):
        raise ClientError(Errors.E213.format(content_type=value), 415, close=True)


def check_declared_length(value: Optional[str], limits: Limits) -> None:
    """E201 before reading a body whose Content-Length is over the limit."""
    if value is not None and value.strip().isdigit() and int(value) > limits.max_request_bytes:
        raise ClientError(Errors.E201.format(size=int(value), limit=limits.max_request_bytes),
                          413, close=True)


class _NotANumber(ValueError):
    """A number JSON does not have (NaN, Infinity) or float cannot hold: its text."""


def _reject_constant(name: str) -> Any:
    raise _NotANumber(name)


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _NotANumber(text)
    return value


def decode_json(body: bytes) -> Any:
    """The JSON value of a UTF-8 body (a leading byte order mark is ignored): E204 for bytes
    that are not UTF-8, E205 for text that is not JSON (also NaN, Infinity, numbers out of
    float range, integers too long, and nesting too deep for the parser)."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ClientError(Errors.E204.format(offset=err.start, err=err.reason), 400) from err
    text = text.removeprefix(BOM)
    if not text.strip():
        raise ClientError(Errors.E205.format(err="the body is empty"), 400)
    try:
        return json.loads(text, parse_constant=_reject_constant, parse_float=_finite)
    except json.JSONDecodeError as err:
        detail = f"{err.msg} at line {err.lineno}, column {err.colno}"
        raise ClientError(Errors.E205.format(err=detail), 400) from err
    except RecursionError as err:
        raise ClientError(Errors.E205.format(err="it is nested too deeply"), 400) from err
    except _NotANumber as err:
        number = err.args[0]
        detail = (f"{number} is not a JSON number" if number in ("NaN", "Infinity", "-Infinity")
                  else f"the number {number[:20]}... is out of range")
        raise ClientError(Errors.E205.format(err=detail), 400) from err
    except ValueError as err:  # an integer of too many digits
        raise ClientError(Errors.E205.format(err=str(err).split(";")[0]), 400) from err


def validate(model: Type[M], value: Any, endpoint: str) -> M:
    """`value` as `model` (strict types, no unknown keys), else E206 naming the problems."""
    try:
        return model.model_validate(value)
    except ValidationError as err:
        problems = [f"{where(e['loc'])}: {e['msg']}" for e in err.errors(include_url=False)]
        more = len(problems) - MAX_SHOWN
        shown = "; ".join(problems[:MAX_SHOWN]) + (f"; and {more} more" if more > 0 else "")
        raise ClientError(Errors.E206.format(endpoint=endpoint, problems=shown), 422) from err


def where(loc: Sequence[Any]) -> str:
    """A pydantic error location as a JSON path: sentences[0][2]."""
    if not loc:
        return "the body"
    text = str(loc[0])
    for part in loc[1:]:
        text += f"[{part}]" if isinstance(part, int) else f".{part}"
    return text


def embed_job(body: bytes, limits: Limits, n_layers: int) -> EmbedJob:
    """A /v1/embed body checked into a job (texts are counted again once tokenized)."""
    request = validate(EmbedRequest, decode_json(body), "/v1/embed")
    sentences, texts = request.sentences, request.texts
    if sentences is None and texts is None:
        raise ClientError(Errors.E207.format(problem="neither `sentences` nor `texts`"), 422)
    if sentences is not None and texts is not None:
        raise ClientError(Errors.E207.format(problem="both `sentences` and `texts`"), 422)
    items: Sequence[Any] = sentences if sentences is not None else texts  # type: ignore[assignment]
    name = "sentences" if sentences is not None else "texts"
    if not items:
        raise ClientError(Errors.E207.format(problem=f"an empty `{name}` list"), 422)
    check_count(len(items), name, limits)
    if sentences is not None:
        for i, tokens in enumerate(sentences):
            for j, token in enumerate(tokens):
                check_token(i, j, token)
        check_tokens(sum(len(s) for s in sentences), limits.max_tokens)
    else:
        assert texts is not None
        check_texts(texts, limits)
    if request.lang is not None and not LANG.fullmatch(request.lang):
        raise ClientError(Errors.E210.format(
            lang=request.lang, err="not a language code",
            fix="Give a spaCy language code such as 'en', 'de' or 'zh'."), 422)
    check_mix(request, n_layers)
    return EmbedJob(layers=request.layers, sentences=sentences, texts=texts, lang=request.lang,
                    mix_weights=request.mix_weights, gamma=request.gamma,
                    max_tokens=limits.max_tokens)


def parse_job(body: bytes, limits: Limits) -> ParseJob:
    """A /v1/parse body checked into a job."""
    request = validate(ParseRequest, decode_json(body), "/v1/parse")
    if not request.texts:
        raise ClientError(Errors.E207.format(problem="an empty `texts` list"), 422)
    check_count(len(request.texts), "texts", limits)
    check_texts(request.texts, limits)
    return ParseJob(texts=request.texts, elmo=request.elmo, max_tokens=limits.max_tokens)


def check_count(n: int, what: str, limits: Limits) -> None:
    if n > limits.max_sentences:
        raise ClientError(Errors.E202.format(n=n, what=what, limit=limits.max_sentences), 413)


def check_tokens(n: int, limit: int) -> None:
    if n > limit:
        raise ClientError(Errors.E203.format(n=n, limit=limit), 413)


def check_token(i: int, j: int, token: str) -> None:
    """E208 for a token that `embed` could never read from a line: empty, with whitespace
    (str.split's, Unicode's), a NUL, or not encodable as UTF-8 (a lone surrogate)."""
    if not token:
        problem: Optional[str] = "is empty"
    elif token.split() != [token]:
        problem = "holds whitespace"
    else:
        problem = unicode_problem(token)
    if problem is not None:
        shown = repr(token if len(token) <= 40 else token[:40] + "...")
        raise ClientError(Errors.E208.format(where=f"Sentence {i}, token {j} ({shown})",
                                             problem=problem), 422)


def check_texts(texts: Sequence[str], limits: Limits) -> None:
    """E208 for a text with a NUL or a lone surrogate; E203 when its whitespace-separated
    words alone are over the token limit (spaCy's tokens are at least as many)."""
    for i, text in enumerate(texts):
        problem = unicode_problem(text)
        if problem is not None:
            raise ClientError(Errors.E208.format(where=f"Text {i}", problem=problem), 422)
    check_tokens(sum(text_tokens_at_least(t) for t in texts), limits.max_tokens)


def unicode_problem(text: str) -> Optional[str]:
    """Why `text` cannot go to the model as UTF-8 text, or None."""
    if "\x00" in text:
        return f"holds a NUL character (at {text.index(chr(0))})"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:
        return f"holds a lone surrogate U+{ord(text[err.start]):04X} (at {err.start})"
    return None


def check_mix(request: EmbedRequest, n_layers: int) -> None:
    """E211 for mix settings without layers "mix", weights that are not one non-negative
    number a layer with a positive sum, or a gamma float32 cannot hold."""
    weights = request.mix_weights
    given = weights is not None or request.gamma is not None
    bad = (given and request.layers != "mix") or (weights is not None and (
        len(weights) != n_layers or any(w < 0 for w in weights) or not any(w > 0 for w in weights))
    ) or (request.gamma is not None and abs(request.gamma) > FLOAT32_MAX)
    if bad:
        value = (f"layers {request.layers!r}, mix_weights {weights}, gamma {request.gamma}")
        raise ClientError(Errors.E211.format(n_layers=n_layers, value=value), 422)
