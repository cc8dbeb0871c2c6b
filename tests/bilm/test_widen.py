"""Widening a biLM's LSTMs: the same outputs, live new cells, clear refusals."""

from pathlib import Path

import pytest
import torch

from spacy_elmo.bilm import batch_to_ids, load_bilm
from spacy_elmo.bilm.widen import widen_lstm
from spacy_elmo.errors import ElmoError

from ..conftest import make_random_bilm

torch.set_num_threads(1)

EFML_DIR = Path(__file__).resolve().parents[1] / "fixtures" / "efml_tiny"
SENTENCES = [["The", "bank", "of", "the", "river", "."], ["苹果", "很", "好吃"], ["naïve", "🙂"]]


def layers(bilm, sentences=SENTENCES):
    with torch.no_grad():
        return bilm(batch_to_ids(sentences)).layers


def test_widened_bilm_computes_the_same_layers():
    bilm = make_random_bilm()
    wide = widen_lstm(bilm, 3 * bilm.options.lstm_dim, seed=1)
    assert wide.options.lstm_dim == 3 * bilm.options.lstm_dim
    assert wide.options.replace(lstm_dim=bilm.options.lstm_dim) == bilm.options
    assert not wide.training
    torch.testing.assert_close(layers(wide), layers(bilm), rtol=0, atol=1e-6)


def test_old_cells_are_copied_gate_by_gate_and_new_ones_are_drawn():
    bilm = make_random_bilm()
    H = bilm.options.lstm_dim
    wide = widen_lstm(bilm, H + 5, seed=0).requires_grad_(False)
    for old, new in zip(bilm.lstm.layers, wide.lstm.layers, strict=True):
        for gate in range(4):
            kept = slice(gate * (H + 5), gate * (H + 5) + H)
            added = slice(gate * (H + 5) + H, (gate + 1) * (H + 5))
            assert torch.equal(new.w_input[..., kept], old.w_input[..., gate * H:(gate + 1) * H])
            assert torch.equal(new.w_hidden[..., kept], old.w_hidden[..., gate * H:(gate + 1) * H])
            assert torch.equal(new.bias[:, kept], old.bias[:, gate * H:(gate + 1) * H])
            assert bool((new.w_input[..., added] != 0).all())
            assert float(new.bias[:, added].abs().sum()) == 0.0
        assert torch.equal(new.w_proj[:, :H], old.w_proj)
        assert float(new.w_proj[:, H:].abs().sum()) == 0.0
    # the non-LSTM parameters are the source's
    for (name, a), (_, b) in zip(wide.encoder.named_parameters(),
                                 bilm.encoder.named_parameters(), strict=True):
        assert torch.equal(a, b), name


def test_the_seed_draws_the_new_cells():
    bilm = make_random_bilm()
    a, b, c = (widen_lstm(bilm, 20, seed=s).lstm.layers[0].w_input for s in (0, 0, 1))
    assert torch.equal(a, b)
    assert not torch.equal(a, c)


def test_new_cells_receive_gradient_and_then_change_the_outputs():
    bilm = make_random_bilm()
    H = bilm.options.lstm_dim
    wide = widen_lstm(bilm, 2 * H).train()
    wide.set_dropout(0.0)
    out = wide(batch_to_ids(SENTENCES)).layers
    (out ** 2).sum().backward()
    grad = wide.lstm.layers[0].w_proj.grad
    assert grad is not None and float(grad[:, H:].abs().sum()) > 0
    with torch.no_grad():
        for p in wide.parameters():
            if p.grad is not None:
                p -= 0.1 * p.grad
    assert not torch.allclose(layers(wide.eval()), layers(bilm), atol=1e-4)


@pytest.mark.parametrize("given", [12, 8, 0, -4, 12.5, "24", True])
def test_a_size_that_does_not_widen_is_refused(given):
    bilm = make_random_bilm()
    assert bilm.options.lstm_dim == 12
    with pytest.raises(ElmoError, match=r"\[E277\] --lstm-dim .* does not widen this biLM, "
                                        r"which has 12 cells"):
        widen_lstm(bilm, given)


def test_a_word_dictionary_biLM_is_refused():
    with pytest.raises(ElmoError, match=r"\[E276\] This biLM reads a word dictionary"):
        widen_lstm(load_bilm(EFML_DIR / "model"), 1024)
