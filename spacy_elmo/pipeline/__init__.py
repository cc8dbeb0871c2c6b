"""The `elmo` pipeline component and its extensions (the architectures it runs are in `ml/`)."""

from ..ml.elmo_model import build_elmo_model
from ..ml.elmo_tok2vec import build_elmo_tok2vec
from ..ml.encoders import build_task_encoder, build_textcat_pool
from ..ml.listener import ElmoListener, build_elmo_listener
from ..ml.scalar_mix import ScalarMix
from .component import ElmoComponent, make_elmo
from .extensions import install_vector_hooks, register_extensions

__all__ = ["ElmoComponent", "make_elmo", "build_elmo_model", "register_extensions",
           "install_vector_hooks", "ElmoListener", "build_elmo_listener", "build_elmo_tok2vec",
           "ScalarMix", "build_task_encoder", "build_textcat_pool"]
