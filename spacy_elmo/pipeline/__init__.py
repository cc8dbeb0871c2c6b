"""spaCy and thinc glue around the pure-PyTorch biLM."""

from .component import ElmoComponent, make_elmo
from .elmo_model import build_elmo_model
from .encoders import build_task_encoder, build_textcat_pool
from .extensions import install_vector_hooks, register_extensions
from .listener import ElmoListener, build_elmo_listener
from .scalar_mix import ScalarMix
from .tok2vec import build_elmo_tok2vec

__all__ = ["ElmoComponent", "make_elmo", "build_elmo_model", "register_extensions",
           "install_vector_hooks", "ElmoListener", "build_elmo_listener", "build_elmo_tok2vec",
           "ScalarMix", "build_task_encoder", "build_textcat_pool"]
