"""`spacy-elmo.ElmoModel.v1`: docs in, the biLM's L+1 layers per doc out, via PyTorchWrapper_v3."""

from __future__ import annotations

from typing import Any, Callable, List, Optional, Sequence, Tuple, cast

import numpy as np
from spacy.tokens import Doc
from spacy.util import registry
from thinc.api import (
    ArgsKwargs,
    Model,
    PyTorchShim,
    PyTorchWrapper_v3,
    get_torch_default_device,
    xp2torch,
)
from thinc.types import Floats3d

from ..bilm import BiLM, BiLMOptions
from ..bilm.io.sources import BilmSource
from ..bilm.io.weights import load_files
from ..bilm.windows import BATCH_SIZE, MAX_BATCH_TOKENS, WINDOW, WORD_CACHE, Piece, batches, split
from ..errors import ElmoError, Errors
from .holder import BiLMHolder
from .output_cache import OUTPUT_CACHE, RETIRED, OutputCache, Retired
from .serialize import check_shape, deserialize_holder, serialize_holder
from .settings import ElmoSettings
from .thinc_adapter import gradients_stamp, torch_module


@registry.architectures("spacy-elmo.ElmoModel.v1")
def build_elmo_model(
    *,
    batch_size: int = BATCH_SIZE,
    max_batch_tokens: int = MAX_BATCH_TOKENS,
    max_sentence_tokens: int = WINDOW,
    word_cache_size: int = WORD_CACHE,
    output_cache_mb: float = 0.0,
    dropout: float = 0.0,
    precision: str = "fp32",
) -> Model[List[Doc], List[Floats3d]]:
    """Run docs through a biLM, sentence by sentence; output (L+1, n_tokens, width) per doc.

    batch_size, max_batch_tokens: the most sentences (windows), and rows x padded tokens, per
    biLM call (sentences sorted by length). max_sentence_tokens: longer
    sentences, and docs without sentence boundaries, run as overlapping windows of this size
    (plus a quarter of it as context on each side).
    word_cache_size: token-encoder outputs kept per distinct word (inference only, exact).
    output_cache_mb: memory for outputs of a frozen biLM, reused across training epochs (off
    by default: for inference it only holds memory; the training configs set 2048).
    dropout: the biLM's own dropout, used only when it is fine-tuned.
    precision: the inference precision (bilm/precision.py): "fp32"; "bf16" where the device
    has native bf16, through bf16 copies of the biLM's weights; "int8" on the CPU, through
    int8 copies of its matrices (training runs fp32 either way). An unknown name is E150.
    The settings are one `ElmoSettings` (settings.py), held with the biLM.
    """
    settings = ElmoSettings(batch_size=batch_size, max_batch_tokens=max_batch_tokens,
                            window=max_sentence_tokens, word_cache_size=word_cache_size,
                            output_cache_mb=output_cache_mb, dropout=dropout,
                            precision=precision)
    wrapper = PyTorchWrapper_v3(BiLMHolder(settings), convert_inputs=_convert_ids,
                                serialize_model=serialize_holder,
                                deserialize_model=deserialize_holder)
    return Model("elmo", forward, layers=[wrapper], dims={"nO": None, "nL": None},
                 attrs={OUTPUT_CACHE: OutputCache(output_cache_mb),
                        **{name: Retired() for name in RETIRED}})


def load_model_bytes(model: Model, data: bytes) -> None:
    """`model.from_bytes(data)`, its recorded dims checked against the biLM it holds."""
    model.from_bytes(data)
    bilm = get_holder(model).bilm
    if bilm is not None:
        check_shape(model, bilm.options.output_dim, bilm.options.n_output_layers)


def settings_of(model: Model) -> ElmoSettings:
    """An ElmoModel's run-time settings."""
    return get_holder(model).settings


def configure(model: Model, **changes: Any) -> ElmoSettings:
    """Change an ElmoModel's settings (`ElmoSettings` fields, checked) and apply them to
    its biLM at once; returns the new settings."""
    holder = get_holder(model)
    settings = holder.settings.replace(**changes)
    if holder.bilm is not None:
        settings.apply(holder.bilm)
    holder.settings = settings
    if settings.output_cache_mb != model.attrs[OUTPUT_CACHE].max_mb:
        model.attrs[OUTPUT_CACHE] = OutputCache(settings.output_cache_mb)
    return settings


def load_weights(model: Model, source: BilmSource, *, lang: str = "en", reload: bool = True
                 ) -> None:
    """Load the biLM `source` names into an ElmoModel (no weights: the biLM bundled for
    `lang`). With reload=False a model that already holds a biLM (e.g. from a saved
    pipeline) is left as it is."""
    if reload or not has_bilm(model):
        set_bilm(model, load_files(source.locate(lang)))


def get_holder(model: Model) -> BiLMHolder:
    """The torch module of an ElmoModel's wrapper: its biLM (None until loaded) and
    char ids."""
    holder = torch_module(model.layers[0])
    assert isinstance(holder, BiLMHolder)
    return holder


def has_bilm(model: Model) -> bool:
    return get_holder(model).bilm is not None


def set_bilm(model: Model, bilm: BiLM) -> None:
    """Put a biLM into an ElmoModel (replacing any earlier one), with the model's settings,
    and set its dims."""
    get_holder(model).put(bilm.to(get_torch_default_device()))
    _set_dims(model, bilm.options)


def _set_dims(model: Model, options: BiLMOptions) -> None:
    model.set_dim("nO", options.output_dim, force=True)
    model.set_dim("nL", options.n_output_layers, force=True)


def forward(model: Model[List[Doc], List[Floats3d]], docs: List[Doc], is_train: bool
            ) -> Tuple[List[Floats3d], Callable]:
    holder = get_holder(model)
    if holder.bilm is None or holder.char_ids is None:
        raise ElmoError(Errors.E050)
    _note_gradients(holder, holder.bilm)
    settings = holder.settings
    settings.apply(holder.bilm)  # nothing to do unless a model sharing the biLM set others
    wrapper = model.layers[0]
    n_layers, width = model.get_dim("nL"), model.get_dim("nO")
    ops = model.ops
    outputs: List[Any] = [ops.alloc3f(n_layers, len(doc), width) for doc in docs]
    cache: Optional[OutputCache] = None if is_train else model.attrs[OUTPUT_CACHE]
    if cache is not None:
        cache.validate(holder.bilm.version.key())
    todo: List[Piece] = []
    for piece in doc_pieces(docs, settings.window):
        hit = cache.get(tuple(piece.words)) if cache is not None else None
        if hit is not None:
            targets = ops.asarray1i(piece.targets.tolist())
            outputs[piece.source][:, targets] = hit[:, piece.start : piece.end]
        else:
            todo.append(piece)
    # once per loaded biLM (each has its own CharIds)
    holder.char_ids.warn_truncation(w for piece in todo for w in piece.words)
    pending: List[Tuple[List[Piece], Callable, Tuple[int, ...]]] = []
    for batch in batches(todo, settings.batch_size, settings.max_batch_tokens):
        ids = holder.char_ids.batch([piece.words for piece in batch]).numpy()
        layers, backprop_batch = wrapper(ids, is_train)
        for b, piece in enumerate(batch):
            values = layers[:, b, : len(piece.words)]
            targets = ops.asarray1i(piece.targets.tolist())
            outputs[piece.source][:, targets] = values[:, piece.start : piece.end]
            if cache is not None:
                cache.put(tuple(piece.words), values.copy())
        if is_train:
            pending.append((batch, backprop_batch, layers.shape))

    def backprop(d_outputs: List[Any]) -> List[Doc]:
        for batch, backprop_batch, shape in pending:
            d_layers: Any = ops.alloc4f(*shape)
            for b, piece in enumerate(batch):
                targets = ops.asarray1i(piece.targets.tolist())
                d_layers[:, b, piece.start : piece.end] = d_outputs[piece.source][:, targets]
            backprop_batch(d_layers)
        return []

    return outputs, backprop


def doc_pieces(docs: Sequence[Doc], max_tokens: int) -> List[Piece]:
    """The biLM inputs of docs: sentences when the docs have boundaries, else the whole doc,
    each cut into windows of `max_tokens` with context (`bilm.windows.split`); a piece's
    source is its doc, its targets the doc's token positions. Whitespace tokens are left out
    (the biLM was never trained on them; they get zero vectors)."""
    pieces: List[Piece] = []
    for i, doc in enumerate(docs):
        if doc.has_annotation("SENT_START"):
            spans = [(sent.start, sent.end) for sent in doc.sents]
        else:
            spans = [(0, len(doc))]
        for span_start, span_end in spans:
            positions = [t.i for t in doc[span_start:span_end] if not t.is_space]
            if positions:
                pieces += split(i, [doc[p].text for p in positions],
                                np.asarray(positions, dtype=np.int64), max_tokens)
    return pieces


def _note_gradients(holder: BiLMHolder, bilm: BiLM) -> None:
    """Move the biLM's weights version on (every cache compares it) when its gradients
    changed since the last run: a backward pass, or an optimizer step, which thinc writes
    into the parameters' memory unseen by torch's version counters (`thinc_adapter`,
    reliance 2). Before any cache is read: the outputs never come from weights older than
    the current ones."""
    stamp = gradients_stamp(holder)
    if stamp != holder.gradients_seen:
        holder.gradients_seen = stamp
        bilm.weights_changed()


def _convert_ids(model: Model, ids: np.ndarray, is_train: bool
                 ) -> Tuple[ArgsKwargs, Callable]:
    """Char ids as an int64 tensor on the wrapper's device, asking for no gradient (thinc's
    default converter would)."""
    shim = cast(PyTorchShim, model.shims[0])
    tensor = xp2torch(model.ops.xp.asarray(ids, dtype="int64"), device=shim.device)
    return ArgsKwargs(args=(tensor,), kwargs={}), lambda d_inputs: None
