"""LazyAdam: Adam for dense parameters, softmax rows moved only at the steps they are sampled."""

import pytest
import torch

from spacy_elmo.pretrain.optim import LazyAdam
from spacy_elmo.pretrain.trainer import train

from .conftest import tiny_config

torch.set_num_threads(1)


def _params(seed=0):
    gen = torch.Generator().manual_seed(seed)
    dense = torch.nn.Parameter(torch.randn(4, 3, generator=gen))
    rows = torch.nn.Parameter(torch.randn(6, 3, generator=gen))
    bias = torch.nn.Parameter(torch.randn(6, generator=gen))
    return dense, rows, bias


def _grads(step, touched):
    gen = torch.Generator().manual_seed(100 + step)
    g_dense = torch.randn(4, 3, generator=gen)
    g_rows, g_bias = torch.zeros(6, 3), torch.zeros(6)
    g_rows[touched] = torch.randn(len(touched), 3, generator=gen)
    g_bias[touched] = torch.randn(len(touched), generator=gen)
    return g_dense, g_rows, g_bias


def test_lazy_adam_is_adam_when_every_row_has_a_gradient():
    lazy_params, adam_params = _params(), _params()
    lazy = LazyAdam([lazy_params[0]], lazy_params[1:], lr=0.01)
    adam = torch.optim.Adam(adam_params, lr=0.01)
    for step in range(5):
        for params in (lazy_params, adam_params):
            for p, g in zip(params, _grads(step, [0, 1, 2, 3, 4, 5]), strict=True):
                p.grad = g.clone()
        lazy.step()
        adam.step()
    for a, b in zip(lazy_params, adam_params, strict=True):
        assert torch.allclose(a, b, rtol=1e-6, atol=1e-7)


def test_rows_without_a_gradient_do_not_move_though_dense_adam_moves_them():
    lazy_params, adam_params = _params(), _params()
    start = [p.detach().clone() for p in lazy_params]
    lazy = LazyAdam([lazy_params[0]], lazy_params[1:], lr=0.01)
    adam = torch.optim.Adam(adam_params, lr=0.01)
    after_first = []
    for step in range(6):
        touched = [0, 1, 2, 3, 4, 5] if step == 0 else [0, 1]  # rows 2-5: one gradient only
        for params in (lazy_params, adam_params):
            for p, g in zip(params, _grads(step, touched), strict=True):
                p.grad = g.clone()
        lazy.step()
        if step == 0:
            after_first = [p.detach().clone() for p in lazy_params]
        adam.step()
    for lazy_p, first in zip(lazy_params[1:], after_first[1:], strict=True):
        assert torch.equal(lazy_p[2:], first[2:])  # untouched since step 0
        assert not torch.equal(lazy_p[:2], first[:2])
    # dense Adam keeps moving the rows on their momentum: the drift this optimizer avoids
    drift = (adam_params[1][2:] - after_first[1][2:]).abs().mean()
    assert drift > 0.02
    assert not torch.equal(lazy_params[0], start[0])
    state = lazy.state[lazy_params[1]]
    assert float(state["step"]) == 6 and set(state) == {"step", "exp_avg", "exp_avg_sq"}


def test_pretraining_with_lazyadam_resumes_exactly_and_refuses_another_optimizer(tmp_path):
    straight = train(tiny_config(tmp_path, output=str(tmp_path / "a"), max_steps=6,
                                 optimizer="lazyadam", lr=0.01), progress=False)
    train(tiny_config(tmp_path, output=str(tmp_path / "b"), max_steps=3,
                      optimizer="lazyadam", lr=0.01), progress=False)
    resumed = train(tiny_config(tmp_path, output=str(tmp_path / "b"), max_steps=6,
                                optimizer="lazyadam", lr=0.01), resume=True, progress=False)
    for (name, a), b in zip(straight.model.state_dict().items(),
                            resumed.model.state_dict().values(), strict=True):
        assert torch.equal(a, b), name
    from spacy_elmo.errors import ElmoError
    with pytest.raises(ElmoError, match=r"\[E105\].*optimizer.*'lazyadam'.*'adam'"):
        train(tiny_config(tmp_path, output=str(tmp_path / "b"), max_steps=8, optimizer="adam",
                          lr=0.01), resume=True, progress=False)


def test_dense_adam_warns_that_unsampled_softmax_rows_drift(tmp_path):
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        train(tiny_config(tmp_path, max_steps=1, optimizer="adam", lr=0.01), progress=False)
    assert any(str(w.message).startswith("[W013] optimizer 'adam'") for w in caught)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        train(tiny_config(tmp_path, output=str(tmp_path / "b"), max_steps=1,
                          optimizer="lazyadam", lr=0.01), progress=False)
    assert not any("W013" in str(w.message) for w in caught)


def test_state_resets_zero_whole_rows_at_the_given_rate_and_resume_exactly(tmp_path):
    from spacy_elmo.bilm.lstm import LSTMState
    from spacy_elmo.pretrain.trainer import reset_rows

    torch.manual_seed(0)
    state = LSTMState(torch.ones(2, 2, 1000, 3), torch.ones(2, 2, 1000, 5))
    reset = reset_rows(state, 0.25)
    zeroed = reset.h[0, 0, :, 0] == 0
    assert 0.2 < float(zeroed.float().mean()) < 0.3
    for t in (reset.h, reset.c):  # a row is reset in every layer and both directions
        assert torch.equal(t == 0, zeroed[None, None, :, None].expand_as(t))
    assert torch.equal(reset_rows(state, 0.0).c, state.c)
    settings = dict(max_steps=6, optimizer="lazyadam", lr=0.01, state_reset=0.5)
    straight = train(tiny_config(tmp_path, output=str(tmp_path / "a"), **settings),
                     progress=False)
    train(tiny_config(tmp_path, output=str(tmp_path / "b"), **{**settings, "max_steps": 3}),
          progress=False)
    resumed = train(tiny_config(tmp_path, output=str(tmp_path / "b"), **settings),
                    resume=True, progress=False)
    for (name, a), b in zip(straight.model.state_dict().items(),
                            resumed.model.state_dict().values(), strict=True):
        assert torch.equal(a, b), name
    unreset = train(tiny_config(tmp_path, output=str(tmp_path / "c"),
                                **{**settings, "state_reset": 0.0}), progress=False)
    assert not torch.equal(unreset.model.softmax.weight, straight.model.softmax.weight)
