"""What a task puts over its vectors, chosen by override: its contextual encoder (spaCy's CNN
window encoder or its biLSTM), ELMo again at the encoder's output (the paper's
`[h_k ; ELMo_k]`), and how text classification pools its tokens (max + mean, or attention).

Each is one registered block whose choice is a setting, so a config switches it from the
command line (`--components.ner.model.tok2vec.encode.kind bilstm`) instead of a copy of
the config.
"""

from __future__ import annotations

from typing import Any, Callable, List, Optional, Tuple

from spacy.util import registry
from thinc.api import Model
from thinc.types import Floats2d

from ..errors import Errors
from ..validation import check_all, choice, integer, number

ENCODERS = ("cnn", "bilstm")
POOLS = ("reduce", "attention")
DEFAULT_DEPTH = {"cnn": 4, "bilstm": 1}
ELMO_AT_OUTPUT = "with-elmo-at-output"


@registry.architectures("spacy-elmo.TaskEncoder.v1")
def build_task_encoder(width: int, kind: str = "cnn", depth: Optional[int] = None,
                       window_size: int = 1, maxout_pieces: int = 3, dropout: float = 0.1
                       ) -> Model[List[Floats2d], List[Floats2d]]:
    """The task's contextual encoder of `width`: "cnn", spaCy's MaxoutWindowEncoder.v2
    (`window_size`, `maxout_pieces`; depth 4 by default), or "bilstm", its
    TorchBiLSTMEncoder.v1 (a bidirectional LSTM of `width` // 2 cells a direction; depth 1
    by default, `dropout` between its layers)."""
    check_all({"kind": kind, "width": width, "depth": depth, "window_size": window_size,
               "maxout_pieces": maxout_pieces, "dropout": dropout},
              {"kind": choice(ENCODERS), "width": integer(1), "depth": integer(1, optional=True),
               "window_size": integer(0), "maxout_pieces": integer(1),
               "dropout": number(0, 1)}, Errors.E020)
    depth = DEFAULT_DEPTH[kind] if depth is None else depth
    if kind == "cnn":
        return registry.architectures.get("spacy.MaxoutWindowEncoder.v2")(
            width=width, window_size=window_size, maxout_pieces=maxout_pieces, depth=depth)
    # torch applies an LSTM's dropout between its layers: none for one layer
    return registry.architectures.get("spacy.TorchBiLSTMEncoder.v1")(
        width=width, depth=depth, dropout=dropout if depth > 1 else 0.0)


@registry.architectures("spacy-elmo.TextCatPool.v1")
def build_textcat_pool(tok2vec: Model, exclusive_classes: bool, pool: str = "reduce",
                       use_reduce_first: bool = False, use_reduce_last: bool = False,
                       use_reduce_max: bool = True, use_reduce_mean: bool = True,
                       nO: Optional[int] = None) -> Model:
    """Text classification over `tok2vec`'s vectors: "reduce", spaCy's TextCatReduce.v1 (the
    `use_reduce_*` poolings, concatenated), or "attention", its
    TextCatParametricAttention.v1 (a learned attention over the tokens)."""
    check_all({"pool": pool}, {"pool": choice(POOLS)}, Errors.E020)
    if pool == "attention":
        return registry.architectures.get("spacy.TextCatParametricAttention.v1")(
            tok2vec=tok2vec, exclusive_classes=exclusive_classes, nO=nO)
    return registry.architectures.get("spacy.TextCatReduce.v1")(
        tok2vec=tok2vec, exclusive_classes=exclusive_classes,
        use_reduce_first=use_reduce_first, use_reduce_last=use_reduce_last,
        use_reduce_max=use_reduce_max, use_reduce_mean=use_reduce_mean, nO=nO)


def with_elmo_at_output(encoder: Model[List[Floats2d], List[Floats2d]]
                        ) -> Model[List[Floats2d], List[Floats2d]]:
    """`[encoder(x) ; ELMo]` for inputs `[x ; ELMo]` whose last `elmo_width` columns (a
    dim, set at initialize) are the ELMo vectors: the paper's `[h_k ; ELMo_k]`. The ELMo
    part's gradient is the sum of what comes through the encoder and what comes directly."""
    return Model(ELMO_AT_OUTPUT, _forward, layers=[encoder], init=_init,
                 dims={"nO": None, "elmo_width": None})


def _forward(model: Model, X: List[Floats2d], is_train: bool
             ) -> Tuple[List[Floats2d], Callable]:
    encoder = model.layers[0]
    elmo = model.get_dim("elmo_width")
    H, backprop_encoder = encoder(X, is_train)
    ops = model.ops
    Y = [ops.xp.hstack((h, x[:, -elmo:])) for h, x in zip(H, X, strict=True)]
    width = H[0].shape[1] if H else encoder.get_dim("nO")

    def backprop(dY: List[Floats2d]) -> List[Floats2d]:
        dX = backprop_encoder([dy[:, :width] for dy in dY])
        out = []
        for dx, dy in zip(dX, dY, strict=True):
            dx = ops.xp.array(dx, copy=True)
            dx[:, -elmo:] += dy[:, width:]
            out.append(dx)
        return out

    return Y, backprop


def _init(model: Model, X: Any = None, Y: Any = None) -> None:
    encoder = model.layers[0]
    encoder.initialize(X=X)
    model.set_dim("nO", encoder.get_dim("nO") + model.get_dim("elmo_width"), force=True)
