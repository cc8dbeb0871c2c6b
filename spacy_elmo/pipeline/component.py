"""The `elmo` pipeline component: runs the biLM once per batch for all its listeners."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence

import numpy as np
import srsly
from spacy import util
from spacy.language import Language
from spacy.pipeline import TrainablePipe
from spacy.tokens import Doc
from spacy.training import Example, validate_get_examples
from spacy.vocab import Vocab
from thinc.api import Model, Optimizer
from thinc.types import Floats3d

from ..bilm.embedder import mix_layers
from ..bilm.io.sources import BilmSource, check_format
from ..errors import ElmoError, Errors, Warnings, warn
from ..ml.elmo_model import has_bilm, load_model_bytes, load_weights
from ..ml.listener import ElmoListener, replace_listener, replace_listener_cfg
from ..ml.serialize import configured_wins, reading
from ..validation import boolean, check_all, number, numbers, path
from .extensions import install_vector_hooks, register_extensions

# The settings' defaults are build_elmo_model's own: spaCy fills them in.
DEFAULT_MODEL = {"@architectures": "spacy-elmo.ElmoModel.v1"}


@Language.factory(
    "elmo",
    assigns=["doc._.elmo", "doc._.elmo_layers"],
    default_config={"model": DEFAULT_MODEL, "weights": None, "options": None,
                    "weights_format": "auto", "store_layers": False, "set_vector_hooks": True,
                    "mix_weights": None, "gamma": 1.0},
)
def make_elmo(nlp: Language, name: str, model: Model[List[Doc], List[Floats3d]],
              weights: Optional[str], options: Optional[str], weights_format: str,
              store_layers: bool, set_vector_hooks: bool, mix_weights: Optional[List[float]],
              gamma: float) -> ElmoComponent:
    """ELMo vectors on `doc._.elmo` (and all layers on `doc._.elmo_layers`).

    weights: a weights.hdf5 file, a directory with options.json + weights.hdf5, an
    ELMoForManyLangs model directory, a URL, or a published name such as
    "allennlp/original"; None uses the biLM bundled for the pipeline's language (English
    and Chinese: a small one each; other languages have none, and need `weights`).
    options: options.json when it is not beside the weights (for an ELMoForManyLangs model:
    its network config, when the model directory lacks it). weights_format: "auto"
    (detected), "allennlp" or "efml". store_layers: keep all L+1 layers on every doc
    (memory: (L+1) * width * 4 bytes per token). set_vector_hooks: make token/span/doc
    `.vector` and `.similarity()` use ELMo. mix_weights: this component's weights of the
    layers (normalised; None = equal), gamma: their scale.
    """
    return ElmoComponent(nlp.vocab, model, name, weights=weights, options=options,
                         weights_format=weights_format, store_layers=store_layers,
                         set_vector_hooks=set_vector_hooks, mix_weights=mix_weights, gamma=gamma)


COMPONENT_RULES = {"weights": path(optional=True), "options": path(optional=True),
                   "store_layers": boolean(), "set_vector_hooks": boolean(),
                   "mix_weights": numbers(optional=True), "gamma": number()}


def _no_gradient(d_outputs: List[Floats3d]) -> List[Doc]:
    return []


class ElmoComponent(TrainablePipe):
    """Runs a biLM over sentences; shares its layers with `ElmoListener`s downstream."""

    def __init__(self, vocab: Vocab, model: Model, name: str = "elmo", *,
                 weights: Optional[str] = None, options: Optional[str] = None,
                 weights_format: str = "auto", store_layers: bool = False,
                 set_vector_hooks: bool = True, mix_weights: Optional[List[float]] = None,
                 gamma: float = 1.0) -> None:
        self.vocab = vocab
        self.model = model
        self.name = name
        self.listener_map: Dict[str, List[ElmoListener]] = {}
        # the backward pass of the last fine-tuning update, until it has run; whether the
        # biLM holds gradients that finish_update has not applied yet
        self._pending: Optional[Callable[[], None]] = None
        self._stepped = False
        check_format(weights_format, "weights_format")
        check_all({"weights": weights, "options": options, "store_layers": store_layers,
                   "set_vector_hooks": set_vector_hooks, "mix_weights": mix_weights,
                   "gamma": gamma}, COMPONENT_RULES, Errors.E020,
                  {key: f"[components.{name}] {key}" for key in COMPONENT_RULES})
        source = BilmSource.from_cfg({"weights": weights, "options": options,
                                      "weights_format": weights_format})
        # the saved settings; the biLM's source under its config keys (see `source`)
        self.cfg: Dict[str, Any] = {**source.to_cfg(), "store_layers": store_layers,
                                    "set_vector_hooks": set_vector_hooks,
                                    "mix_weights": mix_weights, "gamma": gamma}
        model.attrs["replace_listener"] = replace_listener
        self._set_replacement_cfg()
        register_extensions()

    @property
    def source(self) -> BilmSource:
        """Where this component's biLM comes from (its `weights`, `options` and
        `weights_format` settings)."""
        return BilmSource.from_cfg(self.cfg)

    def _set_replacement_cfg(self) -> None:
        """nlp.replace_listeners(...) makes listeners a private copy of this biLM, whose
        config names this component's weights (a copy trained again loads the same biLM)."""
        self.model.attrs["replace_listener_cfg"] = functools.partial(
            replace_listener_cfg, source=self.source)

    # listeners ----------------------------------------------------------------------
    @property
    def listeners(self) -> List[ElmoListener]:
        return [m for c in self.listening_components for m in self.listener_map[c]]

    @property
    def listening_components(self) -> List[str]:
        return list(self.listener_map.keys())

    def add_listener(self, listener: ElmoListener, component_name: str) -> None:
        listener.upstream = self
        self.listener_map.setdefault(component_name, [])
        if listener not in self.listener_map[component_name]:
            self.listener_map[component_name].append(listener)
        if has_bilm(self.model):
            self._sync_listener(listener)

    def remove_listener(self, listener: ElmoListener, component_name: str) -> bool:
        if listener in self.listener_map.get(component_name, []):
            self.listener_map[component_name].remove(listener)
            if not self.listener_map[component_name]:
                del self.listener_map[component_name]
            return True
        return False

    def find_listeners(self, component: Any) -> None:
        """Add the ElmoListeners in another component's model (any pipeline component: spaCy
        calls this with each) that listen to this one, by name or as "*"."""
        names = ("*", self.name)
        if isinstance(getattr(component, "model", None), Model):
            for node in component.model.walk():
                if isinstance(node, ElmoListener) and node.upstream_name in names:
                    self.add_listener(node, component.name)

    def _sync_listener(self, listener: ElmoListener) -> None:
        listener.set_upstream_dims(self.model.get_dim("nO"), self.model.get_dim("nL"))

    # weights --------------------------------------------------------------------------
    def ensure_loaded(self) -> None:
        """Load the configured weights on first use when `initialize` was never called."""
        if not has_bilm(self.model):
            self._load()

    def initialize(self, get_examples: Callable[[], Iterable[Example]], *,
                   nlp: Optional[Language] = None) -> None:
        validate_get_examples(get_examples, "ElmoComponent.initialize")
        self._load()

    def _load(self) -> None:
        load_weights(self.model, self.source, lang=self.vocab.lang)
        self._check_mix_weights(self.model.get_dim("nL"))
        for listener in self.listeners:
            self._sync_listener(listener)

    # saving: a pipeline saved before its first use carries the weights too -------------
    def to_bytes(self, *, exclude: Iterable[str] = tuple()) -> bytes:
        self.ensure_loaded()
        return super().to_bytes(exclude=exclude)

    def to_disk(self, path: Any, *, exclude: Iterable[str] = tuple()) -> None:
        self.ensure_loaded()
        super().to_disk(path, exclude=exclude)

    # loading: damaged data is an error that names the file; the saved biLM with the
    # configured settings (serialize.CONFIGURED) -------------------------------------------
    def from_bytes(self, bytes_data: bytes, *, exclude: Iterable[str] = tuple()
                   ) -> ElmoComponent:
        """As TrainablePipe.from_bytes, keeping the configured settings."""
        self._validate_serialization_attrs()
        readers: Dict[str, Callable[[bytes], Any]] = {
            "cfg": lambda b: self._restore_cfg(srsly.json_loads(b)),
            "vocab": lambda b: self.vocab.from_bytes(b, exclude=exclude),
            "model": lambda b: load_model_bytes(self.model, b)}
        with reading(f"the `{self.name}` component's serialized bytes",
                     f"the `{self.name}` component"):
            util.from_bytes(bytes_data, readers, exclude)
        return self

    def from_disk(self, path: Any, *, exclude: Iterable[str] = tuple()) -> ElmoComponent:
        """As TrainablePipe.from_disk, with each file read under `reading` (its own name)."""
        self._validate_serialization_attrs()
        readers: Dict[str, Callable[[Path], Any]] = {
            "cfg": self._read_cfg,
            "vocab": lambda p: self.vocab.from_disk(p, exclude=exclude),
            "model": self._read_model}
        util.from_disk(path, readers, exclude)
        return self

    def _read_cfg(self, path: Path) -> None:
        if path.exists():
            with reading(str(path), f"the `{self.name}` component's settings (JSON)"):
                self._restore_cfg(srsly.read_json(path))

    def _read_model(self, path: Path) -> None:
        with reading(str(path), f"the `{self.name}` component's biLM"):
            load_model_bytes(self.model, path.read_bytes())

    def _restore_cfg(self, saved: Dict[str, Any]) -> None:
        """The saved settings, except those the config gives (serialize.CONFIGURED);
        configured weights other than the saved biLM's are named in a warning (the saved one
        runs)."""
        configured, origin = self.source.weights, BilmSource.from_cfg(saved).weights
        if configured is not None and origin != configured:
            warn(Warnings.W006.format(
                name=self.name, weights=configured,
                saved="the bundled biLM" if origin is None else f"'{origin}'"), stacklevel=2)
        with configured_wins(self.cfg):
            self.cfg.update(saved)
        self._set_replacement_cfg()

    # running --------------------------------------------------------------------------
    def predict(self, docs: Iterable[Doc]) -> List[Floats3d]:
        docs = list(docs)
        self.ensure_loaded()
        return self.model.predict(docs) if docs else []

    def set_annotations(self, docs: Sequence[Doc], outputs: List[Floats3d]) -> None:
        keep_layers = self.cfg["store_layers"] or bool(self.listener_map)
        for doc, layers in zip(docs, outputs, strict=True):
            array = self.model.ops.to_numpy(layers).astype("float32", copy=False)
            doc._.elmo = self.fixed_mix(array)
            doc._.elmo_layers = array if keep_layers else None
            if self.cfg["set_vector_hooks"]:
                install_vector_hooks(doc)

    def fixed_mix(self, layers: np.ndarray) -> np.ndarray:
        """`doc._.elmo`: this component's fixed weighted average of the layers, `gamma *
        sum_j p_j h_j` with p the normalised `mix_weights` (equal without them): (L+1, n,
        width) -> (n, width). Not learned; each listener learns its own ScalarMix. E270
        when gamma scales the vectors past float32."""
        self._check_mix_weights(layers.shape[0])
        with np.errstate(over="ignore", invalid="ignore"):
            mixed = mix_layers(layers, self.cfg["mix_weights"], self.cfg["gamma"])
        if not np.isfinite(mixed).all():
            raise ElmoError(Errors.E270.format(gamma=self.cfg["gamma"]))
        return mixed

    def _check_mix_weights(self, n_layers: int) -> None:
        """E058 unless `mix_weights` is null or has one weight per biLM layer (checked at
        load and at every use: a loaded pipeline's config may be overridden)."""
        weights = self.cfg["mix_weights"]
        if weights is not None and len(weights) != n_layers:
            raise ElmoError(Errors.E058.format(name=self.name, n=len(weights),
                                               n_layers=n_layers))

    def update(self, examples: Iterable[Example], *, drop: float = 0.0,
               sgd: Optional[Optimizer] = None, losses: Optional[Dict[str, float]] = None
               ) -> Dict[str, float]:
        """Run the biLM once and hand its layers to every listener.

        With all listeners frozen (grad_factor 0) the biLM runs without gradients, and the
        outputs of sentences seen before come from the cache. Otherwise the gradients of
        the fine-tuning listeners are summed, and the biLM's backward pass puts them on its
        parameters once the last of them has reported, or, when some never do (a task
        left out of the update, or with nothing to learn from in the batch), at the next
        `update` or `finish_update`; `finish_update` applies them. `nlp.update` calls
        `finish_update` right after this method, before the listening tasks update, so
        there a batch's gradients are applied at the next update (as for spaCy's tok2vec);
        `spacy train` calls it after every component's update.
        """
        if losses is None:
            losses = {}
        losses.setdefault(self.name, 0.0)
        examples = list(examples)
        validate_get_examples(lambda: examples, "ElmoComponent.update")
        self._backward_pending()
        self._pending = None  # an earlier batch no listener reported on is dropped
        if not self.listeners:  # nothing reads the layers
            return losses
        docs = [eg.predicted for eg in examples]
        self.ensure_loaded()
        batch_id = ElmoListener.get_batch_id(docs)
        tuning = sum(listener.attrs["grad_factor"] != 0 for listener in self.listeners)
        if tuning == 0:
            outputs = self.model.predict(docs)
            for listener in self.listeners:
                listener.receive(batch_id, outputs, _no_gradient)
            return losses
        outputs, backprop_model = self.model.begin_update(docs)
        d_outputs = [self.model.ops.alloc3f(*o.shape) for o in outputs]
        reported = [0]

        def backward() -> None:
            """The biLM's backward pass over what the listeners reported (once; pending
            while none has)."""
            if reported[0]:
                self._pending = None
                backprop_model(d_outputs)
                self._stepped = True

        def accumulate(one_d_outputs: List[Floats3d]) -> List[Doc]:
            for i, d in enumerate(one_d_outputs):
                d_outputs[i] += d
            reported[0] += 1
            if reported[0] == tuning and self._pending is backward:  # the last one
                backward()
            return []

        self._pending = backward
        for listener in self.listeners:
            listener.receive(batch_id, outputs, accumulate)
        return losses

    def _backward_pending(self) -> None:
        """Run the backward pass of an earlier update that not every fine-tuning listener
        reported on."""
        if self._pending is not None:
            self._pending()

    def finish_update(self, sgd: Optimizer) -> None:
        """Update the biLM with the gradients its fine-tuning listeners gave (see
        `update`); a frozen biLM is left as it is (no optimizer step, no weight decay)."""
        self._backward_pending()
        if self._stepped:
            self.model.finish_update(sgd)
            self._stepped = False

    def __getstate__(self) -> Dict[str, Any]:
        # an update's backward pass is a closure over its batch: it is not pickled
        return dict(self.__dict__, _pending=None)

    def get_loss(self, examples: Iterable[Example], scores: List[Floats3d]) -> None:
        """None: the component has no loss of its own (its listeners' tasks have)."""
        return None
