"""ELMo's biLM in pure PyTorch (no spaCy or thinc imports)."""

from .chars import BOS_TOKEN, EOS_TOKEN, CharIds, batch_to_ids
from .io.sources import PUBLISHED, BiLMFiles, locate, resolve_paths
from .io.weights import load_bilm, read_hdf5, save_bilm, to_arrays, write_hdf5
from .lstm import LSTMState
from .model import BiLM, BiLMOutput, StatefulBiLM, WordCache
from .options import PRESETS, BiLMOptions, preset

__all__ = [
    "BOS_TOKEN", "EOS_TOKEN", "CharIds", "batch_to_ids", "LSTMState", "BiLM", "BiLMOutput",
    "StatefulBiLM", "WordCache", "PRESETS", "BiLMOptions", "preset", "PUBLISHED", "BiLMFiles",
    "locate", "resolve_paths", "load_bilm", "read_hdf5", "save_bilm", "to_arrays",
    "write_hdf5",
]
