"""spacy-elmo.ScalarMix.v1 (hand-written backward pass) against torch autograd."""

import numpy as np
import pytest
import srsly
import torch

from spacy_elmo.errors import ElmoError
from spacy_elmo.ml.scalar_mix import EPS, ScalarMix, scalar_mixes


def reference(X, w, gamma, layer_norm):
    """The same mix in torch: gamma * sum_j softmax(w)_j * LN(h_j), LN per token."""
    if layer_norm:
        X = torch.nn.functional.layer_norm(X, X.shape[-1:], eps=EPS)
    return gamma * torch.tensordot(torch.softmax(w, 0), X, dims=([0], [0]))


@pytest.mark.parametrize("layer_norm", [False, True])
def test_forward_and_backward_match_autograd(layer_norm):
    rng = np.random.default_rng(0)
    lengths, n_layers, width = [3, 1, 5], 3, 7
    Xs = [rng.normal(1.0, 2.0, (n_layers, n, width)).astype("float32") for n in lengths]
    mix = ScalarMix(layer_norm=layer_norm, dropout=0.0)
    mix.initialize(X=Xs)
    mix.set_param("w", np.asarray([0.3, -1.2, 0.8], dtype="float32"))
    mix.set_param("gamma", np.asarray([1.7], dtype="float32"))
    Ys, backprop = mix(Xs, is_train=True)
    dYs = [rng.normal(size=(n, width)).astype("float32") for n in lengths]
    dXs = backprop(dYs)

    X = torch.tensor(np.concatenate(Xs, axis=1), dtype=torch.float64, requires_grad=True)
    w = torch.tensor(mix.get_param("w"), dtype=torch.float64, requires_grad=True)
    gamma = torch.tensor(1.7, dtype=torch.float64, requires_grad=True)
    Y = reference(X, w, gamma, layer_norm)
    (Y * torch.tensor(np.concatenate(dYs), dtype=torch.float64)).sum().backward()

    assert [y.shape for y in Ys] == [(n, width) for n in lengths]
    np.testing.assert_allclose(np.concatenate(Ys), Y.detach().numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.concatenate(dXs, axis=1), X.grad.numpy(), rtol=1e-4,
                               atol=1e-5)
    np.testing.assert_allclose(mix.get_grad("w"), w.grad.numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(mix.get_grad("gamma"), [gamma.grad.item()], rtol=1e-4,
                               atol=1e-5)


def test_wrong_number_of_layers_is_a_catalogue_error():
    mix = ScalarMix(n_layers=3, width=4)
    mix.initialize()
    with pytest.raises(ElmoError, match=r"\[E059\] .* 3 biLM layers but got 2"):
        mix([np.zeros((2, 1, 4), dtype="float32")], is_train=False)
    assert scalar_mixes(mix) == [mix]


def test_another_width_than_initialized_on_is_a_catalogue_error():
    """A mix initialized on width 4 mixed width-5 layers silently; the task's next layer
    then failed with a raw shape error."""
    mix = ScalarMix()
    mix.initialize(X=[np.zeros((3, 2, 4), dtype="float32")])
    restored = ScalarMix().from_bytes(mix.to_bytes())  # the width is saved with the mix
    for model in (mix, restored):
        assert model.get_dim("nI") == 4
        assert model.predict([np.ones((3, 2, 4), dtype="float32")])[0].shape == (2, 4)
        for is_train in (False, True):
            with pytest.raises(ElmoError, match=r"\[E054\] .* width 4, but the biLM now "
                                                r"gives width 5"):
                model([np.zeros((3, 1, 5), dtype="float32")], is_train=is_train)


def test_a_mix_without_its_width_is_refused():
    """Mixes saved before 1.0 had no width: a biLM of another width under them went
    unchecked; and a mix initialized without sample layers had none either."""
    with pytest.raises(ElmoError, match=r"\[E262\] .* initialize it with sample layers"):
        ScalarMix(n_layers=3).initialize()
    mix = ScalarMix(n_layers=3, width=4)
    mix.initialize()
    assert mix.get_dim("nI") == 4 and mix.predict([]) == []
    saved = srsly.msgpack_loads(mix.to_bytes())
    saved["nodes"][0]["dims"]["nI"] = None  # as saved before 1.0
    restored = ScalarMix().from_bytes(srsly.msgpack_dumps(saved))
    assert not restored.has_dim("nI")
    with pytest.raises(ElmoError, match=r"\[E261\] .* saved by spacy-elmo before 1\.0"):
        restored.predict([np.ones((3, 2, 4), dtype="float32")])
    with pytest.raises(ElmoError, match=r"\[E262\] "):  # never initialized
        ScalarMix(n_layers=3)([np.ones((3, 2, 4), dtype="float32")], is_train=False)
