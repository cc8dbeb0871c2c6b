"""precision "bf16": bf16 products over fp32 weights, in inference and in training.

These run on any CPU: where bf16 is emulated (no AVX512-BF16 or AMX) its results are the
same, only slower, so the tests allow it (SPACY_ELMO_ALLOW_EMULATED_BF16=1) on tiny models.

Tolerances: bf16 keeps 8 significant bits, so one product is off by up to 2^-9 of its size;
a layer's vectors agree with fp32 to about 1% (relative norm of the difference; measured
0.4-0.6% on these models) and each token's cosine to fp32 stays above 0.999. The products
are autocast's (bitwise); the gate sums, which autocast rounds to bf16, stay fp32 here, so
the LSTM layers are at least as close to fp32 as under autocast (measured 25-35% closer).
"""

import copy
import pickle
import warnings

import pytest
import torch
import torch.nn.functional as F
from spacy_elmo_lab.tiny import TINY_OPTIONS, make_random_bilm

from spacy_elmo.bilm import BiLM, BiLMOptions, WordCache, batch_to_ids, bf16, hardware
from spacy_elmo.bilm.directions import concurrent_directions
from spacy_elmo.bilm.lstm import LSTMState
from spacy_elmo.bilm.precision import check_precision
from spacy_elmo.errors import ElmoError

from ..conftest import embedded_at, run_lstm

SENTENCES = [["The", "bank", "raised", "its", "rates", "."],
             ["We", "sat", "on", "the", "river", "bank", "and", "watched", "the", "boats",
              "go", "by", "."],
             ["Deep", "contextualized", "word", "representations"]]
CLIPPED = BiLMOptions(**{**TINY_OPTIONS.__dict__, "cell_clip": 0.5, "proj_clip": 0.3,
                         "extra": {}})


@pytest.fixture(autouse=True)
def allow_emulated_bf16(monkeypatch):
    monkeypatch.setenv(hardware.ALLOW_EMULATED_BF16, "1")
    warnings.simplefilter("ignore")  # W010 where this CPU emulates bf16


def layers(bilm, ids):
    with torch.inference_mode():
        return bilm(ids).layers


def relative_error(ref, out, mask):
    return [((ref[k][mask] - out[k][mask]).norm() / ref[k][mask].norm()).item()
            for k in range(ref.shape[0])]


def test_the_products_are_autocasts():
    torch.manual_seed(0)
    x, w, c = torch.randn(2, 5, 7), torch.randn(2, 7, 3), torch.randn(2, 5, 3)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        want = torch.bmm(x, w).float()
    w16 = w.to(torch.bfloat16)
    assert torch.equal(bf16.bmm(x, w16), want)
    assert torch.equal(bf16.baddbmm(c, x, w16), c + want)  # the sum in fp32
    assert bf16.bmm(x, w16).dtype == torch.float32
    assert torch.equal(bf16.bmm(x, w), torch.bmm(x, w))  # fp32 weights: plain fp32
    linear = torch.nn.Linear(7, 3)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        want = (x[0] @ linear.weight.t()).float()
    got = bf16.Bf16Linear(linear.weight.t().detach().to(torch.bfloat16), linear.bias)(x[0])
    assert torch.equal(got, want + linear.bias)


@pytest.mark.parametrize("options", [TINY_OPTIONS, CLIPPED], ids=["no-clip", "clip"])
def test_bf16_inference_is_fp32_within_bf16_rounding_and_closer_than_autocast(options):
    bilm = make_random_bilm(options)
    ids = batch_to_ids(SENTENCES)
    mask = (ids > 0).any(-1)
    fp32 = layers(bilm, ids)
    with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16):
        autocast = bilm(ids).layers.float()
    bilm.set_precision("bf16")
    assert bilm.precision == "bf16"
    out = layers(bilm, ids)
    assert out.dtype == torch.float32 and not torch.equal(out, fp32)
    ours, theirs = relative_error(fp32, out, mask), relative_error(fp32, autocast, mask)
    assert max(ours) < 1e-2
    for k in range(out.shape[0]):
        assert F.cosine_similarity(fp32[k][mask], out[k][mask], dim=-1).min() > 0.999
    assert ours[0] <= 1.5 * theirs[0]  # token layer: the same products
    for k in range(1, out.shape[0]):  # LSTM layers: gate sums in fp32
        assert ours[k] <= 1.2 * theirs[k], (k, ours, theirs)
    bilm.set_precision("fp32")
    assert torch.equal(layers(bilm, ids), fp32)


def test_bf16_copies_are_kept_and_follow_changed_weights():
    bilm = make_random_bilm()
    bilm.set_precision("bf16")
    ids = batch_to_ids(SENTENCES)
    before = layers(bilm, ids)
    layer = bilm.lstm.layers[0]
    with torch.no_grad():
        first = layer._matrices("bf16")
        assert layer._matrices("bf16") is first  # made once per weights
        assert all(m.dtype == torch.bfloat16 for m in first)
        layer.w_proj.mul_(0.5)
        assert layer._matrices("bf16") is not first  # the weights changed: made again
        bilm.encoder.projection.weight.mul_(2.0)
    after = layers(bilm, ids)
    assert not torch.equal(after, before)
    assert torch.equal(after, layers(copy.deepcopy(bilm), ids))  # as fresh copies give


def test_a_bf16_biLM_pickles_keeps_its_precision_and_the_word_cache_does_not_mix():
    bilm = make_random_bilm()
    bilm.word_cache = WordCache(100)
    ids = batch_to_ids(SENTENCES)
    fp32 = layers(bilm, ids)
    bilm.set_precision("bf16")
    out = layers(bilm, ids)
    assert not torch.equal(out[0], fp32[0])  # token layer encoded again in bf16
    again = pickle.loads(pickle.dumps(bilm))
    assert again.precision == "bf16"
    assert torch.equal(layers(again, ids), out)
    bilm.set_precision("fp32")
    assert torch.equal(layers(bilm, ids), fp32)


def test_a_sentence_gets_the_same_bf16_vectors_whatever_else_is_in_the_batch():
    bilm = make_random_bilm()
    bilm.set_precision("bf16")
    together = layers(bilm, batch_to_ids(SENTENCES))
    for i, sentence in enumerate(SENTENCES):
        alone = layers(bilm, batch_to_ids([sentence]))[:, 0]
        n = len(sentence)
        torch.testing.assert_close(alone[:, :n], together[:, i, :n], atol=1e-6, rtol=0)


@pytest.mark.parametrize("directions", ["off", "on"])
def test_bf16_fused_training_matches_autograd_through_the_same_bf16_products(directions):
    """The fused forward runs autograd's bf16 forward op for op (outputs equal to fp32
    rounding: a bf16 product's kernel may sum in another order and round its last bit
    differently); gradients agree with autograd's (which rounds them differently, step by
    step) and with fp32's to bf16 rounding; every weight gradient is fp32, for the fp32
    master weights."""
    torch.manual_seed(0)
    bilm = BiLM(CLIPPED)
    lengths = torch.tensor([7, 3, 7, 1, 5, 0])
    rows, L = len(lengths), CLIPPED.n_layers
    x = torch.randn(2, rows, 7, CLIPPED.projection_dim) * 2
    state = LSTMState(torch.randn(L, 2, rows, CLIPPED.projection_dim),
                      torch.randn(L, 2, rows, CLIPPED.lstm_dim))
    with concurrent_directions(directions):
        ref_out, ref_grads = run_lstm(bilm, x, lengths, state, fused=True)
        bilm.set_training_precision("bf16")
        assert bilm.training_precision == "bf16" and bilm.precision == "fp32"
        auto_out, auto_grads = run_lstm(bilm, x, lengths, state, fused=False)
        out, grads = run_lstm(bilm, x, lengths, state, fused=True)
    for a, b in zip(auto_out, out, strict=True):
        torch.testing.assert_close(b, a, rtol=0, atol=1e-6 * float(a.abs().max()))
    for a, b, r in zip(auto_grads, grads, ref_grads, strict=True):
        assert b.dtype == torch.float32
        scale = float(r.abs().max())
        torch.testing.assert_close(b, a, rtol=0, atol=2e-2 * scale)
        torch.testing.assert_close(b, r, rtol=0, atol=2e-2 * scale)
    assert any(not torch.equal(a, b) for a, b in zip(ref_grads, grads, strict=True))
    for a, b in zip(ref_out, out, strict=True):
        torch.testing.assert_close(b, a, rtol=0, atol=1e-2 * float(a.abs().max()))


def test_training_and_inference_precisions_are_separate():
    bilm = make_random_bilm()
    ids = batch_to_ids(SENTENCES)
    fp32 = layers(bilm, ids)
    bilm.set_training_precision("bf16")
    assert torch.equal(layers(bilm, ids), fp32)  # inference stays fp32
    assert not torch.equal(bilm(ids).layers.detach(), fp32)  # with gradients: bf16
    with pytest.raises(ElmoError, match=r"\[E231\] .*'int8'.*inference only"):
        bilm.set_training_precision("int8")


def test_bf16_is_refused_where_it_would_be_emulated(monkeypatch):
    monkeypatch.delenv(hardware.ALLOW_EMULATED_BF16)
    monkeypatch.setattr(hardware, "native_bf16", lambda device: False)
    with pytest.raises(ElmoError, match=r"\[E230\] .*SPACY_ELMO_ALLOW_EMULATED_BF16=1"):
        make_random_bilm().set_precision("bf16")
    with pytest.raises(ElmoError, match=r"\[E230\]"):
        check_precision("bf16", torch.device("cpu"), training=True)
    check_precision("fp32", torch.device("cpu"))
    monkeypatch.setattr(hardware, "native_bf16", lambda device: True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # native: no warning either
        make_random_bilm().set_precision("bf16")


def test_native_bf16_is_read_from_the_cpu_flags_and_from_cuda(monkeypatch):
    monkeypatch.setattr(hardware, "cpu_flags", lambda: {"avx512f", "avx512_vnni"})
    assert not hardware.native_bf16(torch.device("cpu"))
    monkeypatch.setattr(hardware, "cpu_flags", lambda: {"avx512f", "amx_bf16"})
    assert hardware.native_bf16(torch.device("cpu"))
    asked = []
    monkeypatch.setattr(torch.cuda, "is_bf16_supported",
                        lambda including_emulation=True: asked.append(including_emulation))
    hardware.native_bf16(torch.device("cuda", 0))
    assert asked == [False]  # emulation does not count


def test_embed_writes_bf16_vectors_close_to_fp32_and_refuses_emulated_bf16(
        tmp_path, tiny_weights_dir, monkeypatch):

    from spacy_elmo.embed.job import embed_file

    text, out = embedded_at(tmp_path, SENTENCES, tiny_weights_dir, ("fp32", "bf16"))
    for a, b in zip(out["fp32"], out["bf16"], strict=True):
        assert not torch.equal(a, b)
        assert F.cosine_similarity(a, b, dim=-1).min() > 0.999
    monkeypatch.delenv(hardware.ALLOW_EMULATED_BF16)
    monkeypatch.setattr(hardware, "native_bf16", lambda device: False)
    with pytest.raises(ElmoError, match=r"\[E230\]"):
        embed_file(text, tmp_path / "x.hdf5", weights=tiny_weights_dir, precision="bf16",
                   progress=False)
    assert not (tmp_path / "x.hdf5").exists()
