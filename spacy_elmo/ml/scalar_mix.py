"""`spacy-elmo.ScalarMix.v1`: a task's own learned mix of the biLM layers, in thinc."""

from __future__ import annotations

from typing import Any, Callable, List, Optional, Tuple

from spacy.util import registry
from thinc.api import Model
from thinc.types import Floats2d, Floats3d

from ..errors import ElmoError, Errors

EPS = 1e-6
LAYER_NAME = "elmo-scalar-mix"


@registry.layers("spacy-elmo.ScalarMix.v1")
def ScalarMix(*, n_layers: Optional[int] = None, width: Optional[int] = None,
              layer_norm: bool = False, dropout: float = 0.0
              ) -> Model[List[Floats3d], List[Floats2d]]:
    """`gamma * sum_j softmax(w)_j * h_j` per doc; w starts at 0 (uniform), gamma at 1.

    n_layers, width: the number and width of the layers mixed (None: taken from the sample
    layers at initialize; a mix initialized without knowing its width is E262).
    layer_norm normalises each layer of each token over its width (no learned scale),
    so a doc's vectors never depend on the rest of the batch. dropout applies to the mixed
    vectors during training; it is this layer's own setting, not [training] dropout.
    The width is saved with the mix (dim nI), so that a biLM of another width under a
    trained mix is an error that says so (E054), and a mix without it one too (E261).
    """
    return Model(LAYER_NAME, _forward, init=_init, dims={"nL": n_layers, "nI": width},
                 params={"w": None, "gamma": None},
                 attrs={"layer_norm": layer_norm, "elmo_dropout": dropout})


def scalar_mixes(model: Model) -> List[Model]:
    """The ScalarMix layers in `model`'s tree (a listener or private tok2vec has one)."""
    return [node for node in model.walk() if node.name == LAYER_NAME]


def _init(model: Model, X: Optional[List[Floats3d]] = None, Y: Optional[object] = None
          ) -> None:
    if X is not None and len(X):
        model.set_dim("nL", X[0].shape[0], force=True)
        model.set_dim("nI", X[0].shape[2], force=True)
    if not model.has_dim("nI"):
        raise ElmoError(Errors.E262)
    n = model.get_dim("nL")
    model.set_param("w", model.ops.alloc1f(n))
    gamma = model.ops.alloc1f(1)
    gamma[0] = 1.0
    model.set_param("gamma", gamma)


def _forward(model: Model, Xs: List[Floats3d], is_train: bool
             ) -> Tuple[List[Floats2d], Callable]:
    ops = model.ops
    xp = ops.xp
    lengths = [x.shape[1] for x in Xs]
    n_layers = model.get_dim("nL")
    width = _width(model, Xs)
    X: Any = xp.concatenate(Xs, axis=1) if Xs else ops.alloc3f(n_layers, 0, width)
    if X.shape[0] != n_layers:
        raise ElmoError(Errors.E059.format(expected=n_layers, found=X.shape[0]))
    if model.attrs["layer_norm"]:
        mean = X.mean(axis=-1, keepdims=True)
        std = xp.sqrt(((X - mean) ** 2).mean(axis=-1, keepdims=True) + EPS)
        Xn = (X - mean) / std
    else:
        Xn = X
    w: Any = model.get_param("w")
    gamma: Any = model.get_param("gamma")
    s: Any = ops.softmax(w)
    M = xp.tensordot(s, Xn, axes=(0, 0))  # (N, D)
    Y = gamma[0] * M
    rate = model.attrs["elmo_dropout"] if is_train else 0.0
    mask = None
    if rate > 0:
        mask = ops.get_dropout_mask(Y.shape, rate)
        Y = Y * mask

    def backprop(dYs: List[Floats2d]) -> List[Floats3d]:
        dY: Any = xp.concatenate(dYs, axis=0) if dYs else ops.alloc2f(0, width)
        if mask is not None:
            dY = dY * mask
        d_gamma = (dY * M).sum()
        dM = gamma[0] * dY
        ds = xp.tensordot(Xn, dM, axes=([1, 2], [0, 1]))  # (L,)
        dw = s * (ds - (s * ds).sum())
        model.inc_grad("w", dw.astype("float32"))
        model.inc_grad("gamma", d_gamma.reshape(1).astype("float32"))
        dXn = s[:, None, None] * dM[None]
        if model.attrs["layer_norm"]:
            dX = (dXn - dXn.mean(axis=-1, keepdims=True)
                  - Xn * (dXn * Xn).mean(axis=-1, keepdims=True)) / std
        else:
            dX = dXn
        return _split(ops.asarray(dX, dtype="float32"), lengths)

    return _split(Y, lengths, axis=0), backprop


def _width(model: Model, Xs: List[Floats3d]) -> int:
    """The width the mix was initialized on, which the layers must have (E054). A trained
    mix without it was saved before 1.0 (E261); an untrained one was never initialized."""
    if not model.has_dim("nI"):
        raise ElmoError(Errors.E261 if model.has_param("w") else Errors.E262)
    expected = model.get_dim("nI")
    if Xs and Xs[0].shape[2] != expected:
        raise ElmoError(Errors.E054.format(expected=expected, found=Xs[0].shape[2]))
    return expected


def _split(X: Any, lengths: List[int], axis: int = 1) -> list:
    out = []
    start = 0
    for n in lengths:
        out.append(X[start : start + n] if axis == 0 else X[:, start : start + n])
        start += n
    return out
