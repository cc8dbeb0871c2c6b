"""A check before `spacy train` initializes a pipeline (`[initialize.before_init]` of the
configs with a MultiHashEmbed): static vectors switched on need vectors to load, else spaCy
fails deep inside StaticVectors with "IndexError: index -1 is out of bounds"; vectors given
to a model that never reads them are a warning."""

from __future__ import annotations

from typing import Any, Callable, Dict, Iterator

from spacy.language import Language
from spacy.util import registry

from ..errors import ElmoError, Errors, Warnings, warn


def static_vector_layers(section: Dict[str, Any], path: str) -> Iterator[str]:
    """The dotted path of every subsection of `section` that sets include_static_vectors."""
    for key, value in section.items():
        if isinstance(value, dict):
            yield from static_vector_layers(value, f"{path}.{key}")
        elif key == "include_static_vectors" and value is True:
            yield path


def check_static_vectors(nlp: Language) -> Language:
    """E090 when a layer reads static vectors and none are loaded; W020 when vectors are
    given and no layer reads them."""
    config = nlp.config.interpolate()
    layers = list(static_vector_layers(config.get("components", {}), "components"))
    vectors = config.get("initialize", {}).get("vectors")
    if layers and vectors is None and nlp.vocab.vectors.shape[1] == 0:
        raise ElmoError(Errors.E090.format(layers=", ".join(layers)))
    if vectors is not None and not layers:
        warn(Warnings.W020.format(vectors=vectors), stacklevel=2)
    return nlp


@registry.callbacks("spacy-elmo.check_static_vectors.v1")
def make_static_vectors_check() -> Callable[[Language], Language]:
    """The `[initialize.before_init]` callback: `check_static_vectors`."""
    return check_static_vectors
