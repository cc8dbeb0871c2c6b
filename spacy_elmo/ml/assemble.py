"""The output stage every ELMo tok2vec ends in (the listener's and the private biLM's alike):
[features ;] the task's layer mix, then optionally a Maxout projection and an encoder, with
its widths set at initialize from the biLM behind it. Not a task head: the task's own model
(NER's parser, textcat's reducer) reads the vectors this stage gives."""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Protocol, Tuple, runtime_checkable

from spacy.tokens import Doc
from thinc.api import Maxout, Model, chain, concatenate, with_array
from thinc.types import Floats2d

from ..bilm.io.sources import BilmSource
from ..errors import ElmoError, Errors
from .elmo_model import load_weights
from .encoders import ELMO_AT_OUTPUT, with_elmo_at_output
from .scalar_mix import scalar_mixes


class Upstream(Protocol):
    """What a listener needs of the `elmo` component that feeds it."""

    def ensure_loaded(self) -> None: ...


@runtime_checkable
class Listening(Protocol):
    """A source of layers fed by an `elmo` component (listener.ElmoListener), which gives
    its dims; any other source runs a private biLM."""

    upstream: Optional[Upstream]

    def require_dims(self) -> None: ...


def assemble(mixed: Model, source: Model, features: Optional[Model], width: Optional[int],
             encode: Optional[Model], where: str, *, elmo_at_output: bool = False
             ) -> Model[List[Doc], List[Floats2d]]:
    """[features ;] mix, then optionally a Maxout projection to `width` and an encoder, and
    with `elmo_at_output` the mix again beside their output. `source`: the listener, or the
    runner of a private biLM (its ElmoModel holds the `source` attr, a BilmSource)."""
    inner = mixed if features is None else concatenate(features, mixed)
    refs: Dict[str, Optional[Model]] = {"elmo_source": source}
    if features is not None:
        refs["features"] = features
    if (encode is not None or elmo_at_output) and width is None:
        what = "`encode` is set" if encode is not None else "`elmo_at_output` is true"
        raise ElmoError(Errors.E057.format(where=where, what=what))
    if width is not None:
        projection: Model = with_array(Maxout(nO=width, nP=3, normalize=True))
        if elmo_at_output:
            head = projection if encode is None else chain(projection, encode)
            inner = chain(inner, with_elmo_at_output(head))
        else:  # the layout 1.0 saved: its pipelines load into it
            inner = chain(inner, projection)
            if encode is not None:
                inner = chain(inner, encode)
    # with ELMo at the output the width is known once the biLM is (at initialize): the
    # task's layers then take it from their input
    return Model("elmo-tok2vec", _delegate, layers=[inner], init=_init_width,
                 dims={"nO": None if elmo_at_output else width}, refs=refs,
                 attrs={"width": width, "elmo_at_output": elmo_at_output})


def _delegate(model: Model, docs: List[Doc], is_train: bool) -> Tuple[Any, Callable]:
    return model.layers[0](docs, is_train)


def _init_width(model: Model, X: Optional[List[Doc]] = None, Y: Any = None) -> None:
    source = model.get_ref("elmo_source")
    dims_from: Model
    if isinstance(source, Listening):
        dims_from = source
        if not source.has_dim("nO") and source.upstream is not None:
            # an `elmo` component nlp.initialize() skipped ([training] frozen_components)
            source.upstream.ensure_loaded()
        source.require_dims()
    else:  # a private biLM: load it first (a loaded or copied one is kept, with its dims)
        dims_from = source.layers[0]
        # without weights, the biLM bundled for the docs' language (English without docs)
        load_weights(dims_from, dims_from.attrs.get("source", BilmSource()),
                     lang=X[0].vocab.lang if X else "en", reload=False)
    inner = model.layers[0]
    for mix in scalar_mixes(inner):
        mix.set_dim("nL", dims_from.get_dim("nL"), force=True)
        mix.set_dim("nI", dims_from.get_dim("nO"), force=True)
    for node in inner.walk():
        if node.name == ELMO_AT_OUTPUT:
            node.set_dim("elmo_width", dims_from.get_dim("nO"), force=True)
    inner.initialize(X=X)
    width = model.attrs["width"]
    if width is None:
        width = dims_from.get_dim("nO")
        if model.has_ref("features"):
            width += model.get_ref("features").get_dim("nO")
    elif model.attrs.get("elmo_at_output"):
        width += dims_from.get_dim("nO")
    model.set_dim("nO", width, force=True)
