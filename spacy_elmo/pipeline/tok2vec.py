"""ELMo features from a component's own biLM, not shared (`spacy-elmo.ElmoTok2Vec`): as the
listener's, with the task's own layer mix and optional spaCy features beside it."""

from __future__ import annotations

from typing import List, Optional

from spacy.tokens import Doc
from spacy.util import registry
from thinc.api import Model, chain
from thinc.types import Floats2d, Floats3d

from ..bilm.sources import BilmSource, check_format
from ..errors import Errors
from ..validation import check_all
from .elmo_model import build_elmo_model
from .head import assemble
from .listener import MIX_RULES, private_runner
from .scalar_mix import ScalarMix


@registry.architectures("spacy-elmo.ElmoTok2Vec.v2")
def build_elmo_tok2vec_v2(
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
    return _private_tok2vec(elmo, weights, options, weights_format, grad_factor, layer_norm,
                            dropout, features, width, encode, "spacy-elmo.ElmoTok2Vec.v2")


@registry.architectures("spacy-elmo.ElmoTok2Vec.v1")
def build_elmo_tok2vec(
    *,
    weights: Optional[str] = None,
    options: Optional[str] = None,
    grad_factor: float = 0.0,
    layer_norm: bool = False,
    dropout: float = 0.0,
    batch_size: Optional[int] = None,
    max_sentence_tokens: Optional[int] = None,
    word_cache_size: Optional[int] = None,
    output_cache_mb: Optional[float] = None,
    bilm_dropout: Optional[float] = None,
    features: Optional[Model[List[Doc], List[Floats2d]]] = None,
    width: Optional[int] = None,
    encode: Optional[Model[List[Floats2d], List[Floats2d]]] = None,
) -> Model[List[Doc], List[Floats2d]]:
    """The first version of ElmoTok2Vec (configs and pipelines that name it keep loading):
    the ElmoModel settings inline (null: ElmoModel.v1's default; bilm_dropout is its
    dropout). New configs use v2, which takes an `elmo` block."""
    settings = {"batch_size": batch_size, "max_sentence_tokens": max_sentence_tokens,
                "word_cache_size": word_cache_size, "output_cache_mb": output_cache_mb,
                "dropout": bilm_dropout}
    elmo = build_elmo_model(**{k: v for k, v in settings.items() if v is not None})
    return _private_tok2vec(elmo, weights, options, "auto", grad_factor, layer_norm, dropout,
                            features, width, encode, "spacy-elmo.ElmoTok2Vec.v1")


def _private_tok2vec(elmo: Model, weights: Optional[str], options: Optional[str],
                     weights_format: str, grad_factor: float, layer_norm: bool, dropout: float,
                     features: Optional[Model], width: Optional[int], encode: Optional[Model],
                     where: str) -> Model[List[Doc], List[Floats2d]]:
    check_format(weights_format, f"{where} weights_format")
    check_all({"weights": weights, "options": options,
               "grad_factor": grad_factor, "layer_norm": layer_norm, "dropout": dropout,
               "width": width}, MIX_RULES, Errors.E020,
              {key: f"{where} {key}" for key in MIX_RULES})
    elmo.attrs["source"] = BilmSource.from_cfg(
        {"weights": weights, "options": options, "weights_format": weights_format})
    runner = private_runner(elmo, grad_factor)
    mixed: Model[List[Doc], List[Floats2d]] = chain(
        runner, ScalarMix(layer_norm=layer_norm, dropout=dropout))
    return assemble(mixed, runner, features, width, encode, where)
