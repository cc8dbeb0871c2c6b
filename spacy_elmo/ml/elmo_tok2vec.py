"""ELMo features from a component's own biLM, not shared (`spacy-elmo.ElmoTok2Vec.v2`): as the
listener's, with the task's own layer mix and optional spaCy features beside it."""

from __future__ import annotations

from typing import List, Optional

from spacy.tokens import Doc
from spacy.util import registry
from thinc.api import Model, chain
from thinc.types import Floats2d, Floats3d

from ..bilm.io.sources import BilmSource, check_format
from ..errors import Errors
from ..validation import check_all
from .assemble import assemble
from .listener import MIX_RULES, private_runner
from .scalar_mix import ScalarMix

NAME = "spacy-elmo.ElmoTok2Vec.v2"


@registry.architectures(NAME)
def build_elmo_tok2vec(
    *,
    elmo: Model[List[Doc], List[Floats3d]],
    weights: Optional[str] = None,
    options: Optional[str] = None,
    weights_format: str = "auto",
    grad_factor: float = 0.0,
    layer_norm: bool = False,
    dropout: float = 0.0,
    features: Optional[Model[List[Doc], List[Floats2d]]] = None,
    width: Optional[int] = None,
    encode: Optional[Model[List[Floats2d], List[Floats2d]]] = None,
) -> Model[List[Doc], List[Floats2d]]:
    """A component's own biLM (not shared with other components), with this task's mix.

    elmo: the biLM runner, e.g. a spacy-elmo.ElmoModel.v1 block (it owns batching, caches
    and the biLM's dropout). weights, options, weights_format: as the `elmo` component's,
    loaded at initialize (None: the biLM bundled for the docs' language). The other
    settings as in ElmoListener.v1."""
    return _tok2vec(NAME, elmo, weights, options, weights_format, grad_factor, layer_norm,
                    dropout, features, width, encode, False)


@registry.architectures("spacy-elmo.ElmoTok2Vec.v3")
def build_elmo_tok2vec_v3(
    *,
    elmo: Model[List[Doc], List[Floats3d]],
    weights: Optional[str] = None,
    options: Optional[str] = None,
    weights_format: str = "auto",
    grad_factor: float = 0.0,
    layer_norm: bool = False,
    dropout: float = 0.0,
    features: Optional[Model[List[Doc], List[Floats2d]]] = None,
    width: Optional[int] = None,
    encode: Optional[Model[List[Floats2d], List[Floats2d]]] = None,
    elmo_at_output: bool = False,
) -> Model[List[Doc], List[Floats2d]]:
    """As ElmoTok2Vec.v2, with ElmoListener.v2's elmo_at_output."""
    return _tok2vec("spacy-elmo.ElmoTok2Vec.v3", elmo, weights, options, weights_format,
                    grad_factor, layer_norm, dropout, features, width, encode, elmo_at_output)


def _tok2vec(name: str, elmo: Model, weights: Optional[str], options: Optional[str],
             weights_format: str, grad_factor: float, layer_norm: bool, dropout: float,
             features: Optional[Model], width: Optional[int], encode: Optional[Model],
             elmo_at_output: bool) -> Model[List[Doc], List[Floats2d]]:
    check_format(weights_format, f"{name} weights_format")
    check_all({"weights": weights, "options": options,
               "grad_factor": grad_factor, "layer_norm": layer_norm, "dropout": dropout,
               "width": width, "elmo_at_output": elmo_at_output}, MIX_RULES, Errors.E020,
              {key: f"{name} {key}" for key in MIX_RULES})
    elmo.attrs["source"] = BilmSource.from_cfg(
        {"weights": weights, "options": options, "weights_format": weights_format})
    runner = private_runner(elmo, grad_factor)
    mixed: Model[List[Doc], List[Floats2d]] = chain(
        runner, ScalarMix(layer_norm=layer_norm, dropout=dropout))
    return assemble(mixed, runner, features, width, encode, name,
                    elmo_at_output=elmo_at_output)
