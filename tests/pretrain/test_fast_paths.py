"""The pretraining fast paths against the reference: the hand-written LSTM backward and
bf16 precision (bf16 products over fp32 master weights; allowed here where bf16 is emulated).

Tolerances: the fused backward runs the same forward op for op (outputs bitwise equal) and
sums the weight gradients over steps in one matmul instead of step by step, so gradients
agree to fp32 rounding (relative 1e-5). bf16 rounds every matmul input to 8 significant
bits: a step's loss agrees within 2% and gradients point the same way (cosine > 0.99).
"""

import warnings

import pytest
import torch

from spacy_elmo.bilm import BiLM, BiLMOptions, hardware
from spacy_elmo.bilm import precision as precision_module
from spacy_elmo.bilm.directions import concurrent_directions
from spacy_elmo.bilm.lm import BiLanguageModel
from spacy_elmo.bilm.lstm import LSTMState
from spacy_elmo.errors import ElmoError
from spacy_elmo.pretrain.batches import BatchMaker, TrainStreams
from spacy_elmo.pretrain.corpus import SentenceSource, TextSettings
from spacy_elmo.pretrain.trainer import train
from spacy_elmo.pretrain.vocab import Vocab

from ..conftest import run_lstm
from .conftest import TINY_OPTIONS, tiny_config, write_corpus
from .test_resume import params, train_losses

OPTIONS = BiLMOptions(lstm_dim=16, projection_dim=8, n_layers=2, char_embed_dim=4,
                      filters=((1, 4), (2, 4), (3, 8)), n_highway=1, cell_clip=0.5,
                      proj_clip=0.1)


@pytest.mark.parametrize("directions", ["off", "on"])
@pytest.mark.parametrize("clip", [True, False])
@pytest.mark.parametrize("lengths", [[7, 7, 7], [7, 3, 7, 1, 5, 0]])
def test_fused_backward_matches_autograd(clip, lengths, directions):
    """Stacked, and with each direction on its own thread (`directions` "on")."""
    options = OPTIONS if clip else BiLMOptions(**{**OPTIONS.__dict__, "cell_clip": None,
                                                  "proj_clip": None, "extra": {}})
    torch.manual_seed(0)
    bilm = BiLM(options)
    rows = len(lengths)
    x = torch.randn(2, rows, 7, options.projection_dim) * 2
    L, P, H = options.n_layers, options.projection_dim, options.lstm_dim
    state = LSTMState(torch.randn(L, 2, rows, P), torch.randn(L, 2, rows, H))
    lengths_t = torch.tensor(lengths)
    with concurrent_directions(directions):
        ref_out, ref_grads = run_lstm(bilm, x, lengths_t, state, fused=False)
        out, grads = run_lstm(bilm, x, lengths_t, state, fused=True)
    for a, b in zip(ref_out, out, strict=True):
        assert torch.equal(a, b)  # the same forward, op for op
    for a, b in zip(ref_grads, grads, strict=True):
        torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-5 * float(a.abs().max()))
    if clip:  # the clips were really hit, so their gradient masks were exercised
        with torch.no_grad():
            outputs, final = bilm.lstm(x[0], x[1], lengths_t, state)
        ran = lengths_t > 0  # a row of no steps keeps its initial state
        assert final.c[:, :, ran].abs().max() == pytest.approx(0.5)
        assert outputs[0].abs().max() == pytest.approx(0.1)  # layer 0: no residual


def test_training_step_fused_matches_reference(tmp_path):
    """Three steps of a real run: the same losses, parameters within fp32 rounding."""
    runs = {}
    for backward in ("fused", "autograd"):
        runs[backward] = train(tiny_config(tmp_path, output=str(tmp_path / backward),
                                           max_steps=3, log_every=1,
                                           lstm_backward=backward),
                               progress=False)
    losses = {k: [loss for _, loss in train_losses(tmp_path / k)] for k in runs}
    assert losses["fused"][0] == losses["autograd"][0]  # same weights: the same forward
    assert losses["fused"] == pytest.approx(losses["autograd"], rel=1e-5)
    a, b = params(runs["fused"].model), params(runs["autograd"].model)
    for key in a:
        torch.testing.assert_close(a[key], b[key], rtol=1e-5, atol=1e-6)


@pytest.fixture
def allow_emulated_bf16(monkeypatch):
    """bf16 on this CPU even where it is emulated (the same results, only slower)."""
    monkeypatch.setenv(hardware.ALLOW_EMULATED_BF16, "1")
    warnings.simplefilter("ignore")  # W010 where bf16 is emulated


def test_bf16_step_close_to_fp32_and_to_autocast(tmp_path, allow_emulated_bf16):
    """The native bf16 step (fused LSTM backward, bf16 copies) against fp32 and against
    the same step under torch's bf16 autocast (autograd's LSTM backward)."""
    torch.manual_seed(0)
    corpus = write_corpus(tmp_path / "c.txt")
    vocab = Vocab(sorted(set(corpus.read_text().split())))
    streams = TrainStreams(SentenceSource([corpus], TextSettings(), shuffle=False),
                           BatchMaker(vocab, 50), rows=4, window=6)
    batch = streams.next_batch()
    model = BiLanguageModel(BiLM(OPTIONS), len(vocab), n_negatives=8, dropout=0.0).train()
    results = {}
    for name in ("fp32", "bf16", "autocast"):
        model.set_training_precision("bf16" if name == "bf16" else "fp32")
        model.zero_grad()
        torch.manual_seed(1)  # the same negatives
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=name == "autocast"):
            out = model(batch)
        assert out.loss_fwd.dtype == torch.float32
        assert out.state.c.dtype == torch.float32
        if name != "autocast":  # (autocast leaves h in bf16)
            assert out.state.h.dtype == torch.float32  # the carried state: fp32
        out.mean_loss.backward()
        grad = torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])
        assert grad.dtype == torch.float32
        assert all(p.dtype == torch.float32 for p in model.parameters())
        results[name] = (out.mean_loss.item(), grad)
    assert results["bf16"][0] != results["fp32"][0]  # bf16 really ran
    for other in ("fp32", "autocast"):
        assert results["bf16"][0] == pytest.approx(results[other][0], rel=2e-2)
        cosine = torch.nn.functional.cosine_similarity(results["bf16"][1],
                                                       results[other][1], dim=0)
        assert cosine > 0.99


def test_bf16_resume_is_exact(tmp_path, allow_emulated_bf16):
    settings = dict(precision="bf16", options=TINY_OPTIONS)
    straight = train(tiny_config(tmp_path, output=str(tmp_path / "a"), max_steps=8,
                                 **settings), progress=False)
    train(tiny_config(tmp_path, output=str(tmp_path / "b"), max_steps=4, **settings),
          progress=False)
    resumed = train(tiny_config(tmp_path, output=str(tmp_path / "b"), max_steps=8,
                                **settings), resume=True, progress=False)
    a, b = params(straight.model), params(resumed.model)
    for key in a:
        assert torch.equal(a[key], b[key]), key
    assert train_losses(tmp_path / "b") == train_losses(tmp_path / "a")


def test_a_run_resumes_in_the_other_precision(tmp_path, allow_emulated_bf16):
    """A checkpoint holds fp32 only (weights, optimizer, carried LSTM state), whatever
    the run's precision: fp32 steps resumed as bf16 continue exactly as a bf16 run from
    that checkpoint, resumed twice, does."""
    def run(name, *legs, resume=False):
        for i, (steps, precision) in enumerate(legs):
            result = train(tiny_config(tmp_path, output=str(tmp_path / name), max_steps=steps,
                                       precision=precision), resume=resume or i > 0,
                           progress=False)
        return result

    once = run("once", (4, "fp32"), (6, "bf16"))
    twice = run("twice", (4, "fp32"), (5, "bf16"), (6, "bf16"))
    fp32 = run("fp32", (4, "fp32"), (6, "fp32"))
    a, b, c = params(once.model), params(twice.model), params(fp32.model)
    for key in a:
        assert torch.equal(a[key], b[key]), key
    assert any(not torch.equal(a[key], c[key]) for key in a)  # bf16 really ran
    # the fp32 legs logged the same losses (steps 2 and 4)
    assert train_losses(tmp_path / "once")[:2] == train_losses(tmp_path / "fp32")[:2]
    back = run("once", (8, "fp32"), resume=True)  # and back to fp32
    assert back.step == 8


def test_bf16_is_refused_where_emulated_before_any_file(tmp_path, monkeypatch):
    monkeypatch.setattr(hardware, "native_bf16", lambda device: False)
    monkeypatch.delenv(hardware.ALLOW_EMULATED_BF16, raising=False)
    with pytest.raises(ElmoError, match=r"\[E230\] .*SPACY_ELMO_ALLOW_EMULATED_BF16=1"):
        train(tiny_config(tmp_path, max_steps=1, precision="bf16"), progress=False)
    assert not (tmp_path / "run").exists()
    # allowed: one warning (W010), and the run trains
    monkeypatch.setenv(hardware.ALLOW_EMULATED_BF16, "1")
    monkeypatch.setattr(precision_module, "_WARNED", set())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert train(tiny_config(tmp_path, max_steps=1, precision="bf16"),
                     progress=False).step == 1
    assert [str(w.message)[:7] for w in caught if "W010" in str(w.message)] == ["[W010] "]
    # ... and only where the device emulates bf16
    monkeypatch.setattr(hardware, "native_bf16", lambda device: True)
    monkeypatch.setattr(precision_module, "_WARNED", set())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        train(tiny_config(tmp_path, max_steps=1, precision="bf16"), overwrite=True,
              progress=False)
    assert not any("W010" in str(w.message) for w in caught)


def test_bad_precision_is_refused(tmp_path):
    with pytest.raises(ElmoError, match="precision"):
        tiny_config(tmp_path, precision="fp16")
    with pytest.raises(ElmoError, match="lstm_backward"):
        tiny_config(tmp_path, lstm_backward="cudnn")
