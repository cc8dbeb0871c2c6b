"""The JSON bodies of the server's endpoints, as pydantic models: requests are validated
against them (strictly: no coercion, no unknown keys) and the OpenAPI docs show them."""

from __future__ import annotations

from typing import Any, Dict, List, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field

Layers = Literal["all", "top", "average", "mix"]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class EmbedRequest(Strict):
    """Sentences as tokens, or texts to tokenize: one of the two."""

    sentences: Optional[List[List[str]]] = Field(None, description=(
        "Tokenized sentences: each a list of tokens (non-empty strings without whitespace); "
        "an empty list gives 0 vectors."), examples=[[["The", "cat", "sat", "."]]])
    texts: Optional[List[str]] = Field(None, description=(
        "Texts, each tokenized by spaCy's tokenizer for `lang` and embedded as one sequence "
        "(whitespace tokens left out); the answer gives the tokens."))
    lang: Optional[str] = Field(None, description=(
        "spaCy language code of the tokenizer for `texts` (default: the server's)."))
    layers: Layers = Field("all", description=(
        "all: (L+1, n_tokens, width) per sentence; top, average, mix: (n_tokens, width). "
        "mix: gamma * sum_j p_j h_j, p the normalised mix_weights (default: equal, or a "
        "pipeline's own mix)."))
    mix_weights: Optional[List[float]] = Field(None, description=(
        "With layers \"mix\": one non-negative weight per layer, token layer first."))
    gamma: Optional[float] = Field(None, description="With layers \"mix\": the scale.")


class EmbedResponse(BaseModel):
    layers: Layers
    width: int
    embeddings: List[Any] = Field(description=(
        "One nested list per sentence: (L+1, n_tokens, width) for layers all, else "
        "(n_tokens, width)."))
    tokens: Optional[List[List[str]]] = Field(None, description="The tokens of each text.")


class ParseRequest(Strict):
    texts: List[str] = Field(description="Texts for the pipeline.",
                             examples=[["Alice flew to Paris."]])
    elmo: bool = Field(False, description=(
        "Also give each doc's ELMo vectors (doc._.elmo: n_tokens x width, the pipeline's own "
        "mix)."))


class ParsedDoc(BaseModel):
    doc: Dict[str, Any] = Field(description="spaCy's Doc.to_json().")
    elmo: Optional[List[List[float]]] = None


class ParseResponse(BaseModel):
    docs: List[ParsedDoc]


class ErrorDetail(BaseModel):
    code: str = Field(examples=["E203"])
    message: str
    status: int


class ErrorResponse(BaseModel):
    error: ErrorDetail


class HealthResponse(BaseModel):
    status: Literal["ok", "stopping", "failed"]


class InfoResponse(BaseModel):
    version: str
    model: Dict[str, Any]
    shape: Dict[str, int]
    precision: str
    checksum: str = Field(description="SHA-256 over the biLM's tensors (checksums.tensors_sha256).")
    endpoints: List[str]
    settings: Dict[str, Any]
    stats: Dict[str, int]
