"""ELMo features for NER, textcat and other components from the shared `elmo` component: the
listener (`spacy-elmo.ElmoListener`), with the task's own learned layer mix and optional
spaCy features beside it, and what `nlp.replace_listeners` turns it into (a private copy of
the component's biLM)."""

from __future__ import annotations

from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple

from spacy.tokens import Doc
from spacy.util import registry
from thinc.api import Model, chain
from thinc.types import Floats2d, Floats3d

from ..bilm.io.sources import BilmSource
from ..errors import ElmoError, Errors, Warnings, warn
from ..validation import boolean, check_all, integer, number, path, string
from .assemble import Upstream, assemble
from .scalar_mix import ScalarMix


class _Transient:
    """What a listener holds only while its pipeline runs: the upstream `elmo` component and
    the batch `receive` gave, with its backprop closure. Pickled and copied empty (a closure
    cannot be pickled and must not outlive its batch; a pickled listener does not carry its
    upstream component along), so the listener needs no pickling code of its own."""

    def __init__(self) -> None:
        self.upstream: Optional[Upstream] = None
        self.batch_id: Optional[int] = None
        self.outputs: Optional[List[Floats3d]] = None
        self.backprop: Optional[Callable] = None

    def __reduce__(self) -> Tuple[type, Tuple[()]]:
        return (_Transient, ())


class ElmoListener(Model):
    """Receives the `elmo` component's layers during `update`; reads them from
    `doc._.elmo_layers` otherwise (zeros of the right shape where a doc has none, with a
    warning once the listener has been fed real layers before)."""

    name = "elmo-listener"

    def __init__(self, upstream_name: str, grad_factor: float) -> None:
        Model.__init__(self, name=self.name, forward=_listener_forward,
                       dims={"nO": None, "nL": None},
                       attrs={"grad_factor": grad_factor, "fed": False})
        self.upstream_name = upstream_name
        self._transient = _Transient()
        self._warned = False

    @property
    def upstream(self) -> Optional[Upstream]:
        """The `elmo` component, once it found this one (not pickled)."""
        return self._transient.upstream

    @upstream.setter
    def upstream(self, component: Optional[Upstream]) -> None:
        self._transient.upstream = component

    @staticmethod
    def get_batch_id(docs: Iterable[Doc]) -> int:
        return sum(sum(token.orth for token in doc) for doc in docs)

    def receive(self, batch_id: int, outputs: List[Floats3d], backprop: Callable) -> None:
        batch = self._transient
        batch.batch_id, batch.outputs, batch.backprop = batch_id, outputs, backprop
        self.attrs["fed"] = True

    def release(self) -> None:
        """Forget the batch `receive` gave (the task's model has taken it)."""
        batch = self._transient
        batch.batch_id, batch.outputs, batch.backprop = None, None, None

    def require_dims(self) -> None:
        """E053 unless the upstream `elmo` component has given its width and layer count."""
        if not self.has_dim("nO") or not self.has_dim("nL"):
            raise ElmoError(Errors.E053.format(upstream=self.upstream_name,
                                               which=upstream_component(self.upstream_name)))

    def set_upstream_dims(self, width: int, n_layers: int) -> None:
        for name, value in (("nO", width), ("nL", n_layers)):
            self.set_dim(name, value, force=True)


def _listener_forward(model: ElmoListener, docs: List[Doc], is_train: bool
                      ) -> Tuple[List[Floats3d], Callable]:
    batch = model._transient
    if is_train and batch.batch_id is not None:
        batch_id = model.get_batch_id(docs)
        if batch_id != batch.batch_id:
            raise ElmoError(Errors.E052.format(got=batch_id, expected=batch.batch_id))
        outputs, upstream_backprop = batch.outputs, batch.backprop
        model.release()  # one use per update: a later update must bring its own layers
        factor = model.attrs["grad_factor"]
        assert outputs is not None and upstream_backprop is not None

        def backprop(d_outputs: List[Floats3d]) -> List[Doc]:
            if factor != 0:
                upstream_backprop([d * factor for d in d_outputs])
            return []

        return outputs, backprop
    model.require_dims()
    n_layers, width = model.get_dim("nL"), model.get_dim("nO")
    outputs = []
    for doc in docs:
        layers = doc._.elmo_layers if Doc.has_extension("elmo_layers") else None
        if layers is None or layers.shape != (n_layers, len(doc), width):
            if is_train and len(doc):  # an update the `elmo` component took no part in
                raise ElmoError(Errors.E056)
            if len(doc) and model.attrs["fed"] and not model._warned:
                model._warned = True
                warn(Warnings.W003, stacklevel=2)
            outputs.append(model.ops.alloc3f(n_layers, len(doc), width))
        else:
            outputs.append(model.ops.asarray3f(layers))
    return outputs, lambda d_outputs: []


def upstream_component(upstream: str) -> str:
    """What a listener's `upstream` names, in words (for E053)."""
    return "`elmo` component" if upstream == "*" else f"component named {upstream!r}"


MIX_RULES = {"upstream": string(), "weights": path(optional=True),
             "options": path(optional=True), "grad_factor": number(0),
             "layer_norm": boolean(), "dropout": number(0, 1, high_open=True),
             "width": integer(1, optional=True), "elmo_at_output": boolean()}


@registry.architectures("spacy-elmo.ElmoListener.v1")
def build_elmo_listener(
    *,
    upstream: str = "*",
    grad_factor: float = 0.0,
    layer_norm: bool = False,
    dropout: float = 0.0,
    features: Optional[Model[List[Doc], List[Floats2d]]] = None,
    width: Optional[int] = None,
    encode: Optional[Model[List[Floats2d], List[Floats2d]]] = None,
) -> Model[List[Doc], List[Floats2d]]:
    """Token vectors from a shared `elmo` component, mixed for this task.

    grad_factor 0 keeps the biLM frozen (the paper's feature-based use); > 0 fine-tunes it
    with the task's gradients scaled by that factor. features, e.g. spacy.MultiHashEmbed.v2,
    are concatenated before the ELMo vector ([x_k ; ELMo_k]). width: project [x ; ELMo] to
    this width (Maxout + layer norm) so that the task learns its own features from them;
    encode: then a contextual encoder of that width, e.g. spacy-elmo.TaskEncoder.v1 (the
    paper feeds ELMo into the task's own recurrent encoder).
    """
    return _listener("spacy-elmo.ElmoListener.v1", upstream, grad_factor, layer_norm,
                     dropout, features, width, encode, False)


@registry.architectures("spacy-elmo.ElmoListener.v2")
def build_elmo_listener_v2(
    *,
    upstream: str = "*",
    grad_factor: float = 0.0,
    layer_norm: bool = False,
    dropout: float = 0.0,
    features: Optional[Model[List[Doc], List[Floats2d]]] = None,
    width: Optional[int] = None,
    encode: Optional[Model[List[Floats2d], List[Floats2d]]] = None,
    elmo_at_output: bool = False,
) -> Model[List[Doc], List[Floats2d]]:
    """As ElmoListener.v1, and with elmo_at_output the ELMo vector again beside the
    encoder's output (the paper's [h_k ; ELMo_k]; the task then reads width + the biLM's
    width)."""
    return _listener("spacy-elmo.ElmoListener.v2", upstream, grad_factor, layer_norm,
                     dropout, features, width, encode, elmo_at_output)


def _listener(name: str, upstream: str, grad_factor: float, layer_norm: bool, dropout: float,
              features: Optional[Model], width: Optional[int], encode: Optional[Model],
              elmo_at_output: bool) -> Model[List[Doc], List[Floats2d]]:
    check_all({"upstream": upstream, "grad_factor": grad_factor, "layer_norm": layer_norm,
               "dropout": dropout, "width": width, "elmo_at_output": elmo_at_output},
              MIX_RULES, Errors.E020, {key: f"{name} {key}" for key in MIX_RULES})
    receiver = ElmoListener(upstream, grad_factor)
    mixed: Model[List[Doc], List[Floats2d]] = chain(
        receiver, ScalarMix(layer_norm=layer_norm, dropout=dropout))
    return assemble(mixed, receiver, features, width, encode, name,
                    elmo_at_output=elmo_at_output)


def private_runner(elmo: Model, grad_factor: float) -> Model[List[Doc], List[Floats3d]]:
    """Runs a component's own ElmoModel: frozen (cached, no gradients) at grad_factor 0."""
    return Model("elmo-private", _private_forward, layers=[elmo],
                 attrs={"grad_factor": grad_factor})


def _private_forward(model: Model, docs: List[Doc], is_train: bool
                     ) -> Tuple[List[Floats3d], Callable]:
    elmo = model.layers[0]
    factor = model.attrs["grad_factor"]
    if not is_train or factor == 0:
        return elmo.predict(docs), lambda d_outputs: []
    outputs, backprop_elmo = elmo(docs, is_train)

    def backprop(d_outputs: List[Floats3d]) -> List[Doc]:
        return backprop_elmo([d * factor for d in d_outputs])

    return outputs, backprop


def replace_listener(new_model: Model, listener: Model, component: Any) -> Model:
    """For `nlp.replace_listeners`: the listener becomes a private copy of the biLM that keeps
    the listener's grad_factor."""
    return private_runner(new_model, listener.attrs["grad_factor"])


def replace_listener_cfg(elmo_cfg: Dict[str, Any], listener_cfg: Dict[str, Any], *,
                         source: BilmSource = BilmSource()) -> Dict[str, Any]:
    """The config of `replace_listener`'s result: an ElmoTok2Vec.v2 (v3 for a v2 listener)
    block with the `elmo`
    component's model block and `source`, where its biLM came from (a pipeline trained again
    from this config loads the same biLM; a saved one carries it anyway)."""
    keys = ["grad_factor", "layer_norm", "dropout", "features", "width", "encode"]
    name = "spacy-elmo.ElmoTok2Vec.v2"
    if "elmo_at_output" in listener_cfg:  # a v2 listener's setting: ElmoTok2Vec.v3 has it
        keys.append("elmo_at_output")
        name = "spacy-elmo.ElmoTok2Vec.v3"
    cfg: Dict[str, Any] = {"@architectures": name, "elmo": dict(elmo_cfg), **source.to_cfg()}
    if source.weights_format == "auto":
        del cfg["weights_format"]
    for key in keys:
        if key in listener_cfg:
            cfg[key] = listener_cfg[key]
    return cfg
