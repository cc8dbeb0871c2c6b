"""The biLM's maths beyond the fixture: layouts, variants, determinism, caching, masks."""

import copy

import numpy as np
import pytest
import torch

from spacy_elmo.bilm import BiLM, BiLMOptions, batch_to_ids, load_bilm, save_bilm
from spacy_elmo.bilm.model import WordCache

from ..conftest import TINY_OPTIONS, make_random_bilm

SENTS = [["The", "bank", "raised", "rates", "."],
         ["We", "sat", "on", "the", "river", "bank", "."],
         ["Hi"],
         ["A", "much", "longer", "sentence", "with", "emoji", "🙂", "and", "中文", "text", "."]]


def reference_forward(bilm: BiLM, tokens):
    """The straightforward computation, one sentence, one timestep and one direction at a
    time, written independently of the batched implementation."""
    o = bilm.options
    ids = bilm.add_boundaries(batch_to_ids([tokens], o.max_characters_per_token))[0]
    enc = bilm.encoder
    xs = []
    for row in ids:
        e = enc.char_embedding(row)  # (chars, dim)
        feats = []
        start = 0
        for k_f, (width, n) in enumerate(o.filters):
            w = enc.conv_weights[k_f]
            b = enc.conv_biases[k_f]
            conv = torch.stack([(w * e[p : p + width].T[None]).sum((1, 2))
                                for p in range(o.max_characters_per_token - width + 1)])
            act = torch.relu if o.activation == "relu" else torch.tanh
            feats.append(act(conv.max(0).values + b))
            start += n
        h = torch.cat(feats)
        F = o.n_filters
        for hw in enc.highways:
            t = torch.relu(hw.weight[:F] @ h + hw.bias[:F])
            g = torch.sigmoid(hw.weight[F:] @ h + hw.bias[F:])
            h = g * t + (1 - g) * h
        xs.append(enc.projection.weight @ h + enc.projection.bias)
    x = torch.stack(xs)

    def run_direction(seq, d):
        outs = []
        inp = seq
        for k, layer in enumerate(bilm.lstm.layers):
            h = torch.zeros(o.projection_dim)
            c = torch.zeros(o.lstm_dim)
            res = []
            for t in range(inp.shape[0]):
                z = inp[t] @ layer.w_input[d] + h @ layer.w_hidden[d] + layer.bias[d]
                i, j, f, og = z.chunk(4)
                c = torch.sigmoid(f + 1.0) * c + torch.sigmoid(i) * torch.tanh(j)
                if o.cell_clip:
                    c = c.clamp(-o.cell_clip, o.cell_clip)
                h = (torch.sigmoid(og) * torch.tanh(c)) @ layer.w_proj[d]
                if o.proj_clip:
                    h = h.clamp(-o.proj_clip, o.proj_clip)
                res.append(h)
            out = torch.stack(res)
            if k > 0 and o.use_skip_connections:
                out = out + inp
            outs.append(out)
            inp = out
        return outs

    fwd = run_direction(x, 0)
    bwd = [b.flip(0) for b in run_direction(x.flip(0), 1)]
    layers = [torch.cat([x, x], -1)]
    layers += [torch.cat([f, b], -1) for f, b in zip(fwd, bwd, strict=True)]
    return torch.stack(layers)[:, 1:-1]


@pytest.mark.parametrize("options", [
    TINY_OPTIONS,
    TINY_OPTIONS.replace(use_skip_connections=False),
    TINY_OPTIONS.replace(activation="tanh"),
    TINY_OPTIONS.replace(n_layers=1, n_highway=0),
    TINY_OPTIONS.replace(n_layers=3, n_highway=2),
    TINY_OPTIONS.replace(cell_clip=None, proj_clip=None, max_characters_per_token=20),
], ids=["base", "no-skip", "tanh", "1-layer-no-highway", "3-layers", "no-clip"])
def test_batched_equals_reference(options):
    bilm = make_random_bilm(options)
    with torch.no_grad():
        out = bilm(batch_to_ids(SENTS, options.max_characters_per_token))
        assert out.layers.shape == (options.n_layers + 1, len(SENTS), 11,
                                    options.output_dim)
        for i, tokens in enumerate(SENTS):
            expected = reference_forward(bilm, tokens)
            got = out.layers[:, i, : len(tokens)]
            torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)
            assert not out.layers[:, i, len(tokens):].any()


def test_deterministic_mode_ignores_batch_and_history(tiny_bilm):
    with torch.no_grad():
        alone = tiny_bilm(batch_to_ids([SENTS[1]])).layers[:, 0]
        in_batch = tiny_bilm(batch_to_ids(SENTS)).layers[:, 1, : len(SENTS[1])]
        other = tiny_bilm(batch_to_ids([SENTS[3], SENTS[1]])).layers[:, 1, : len(SENTS[1])]
        again = tiny_bilm(batch_to_ids([SENTS[1]])).layers[:, 0]
    torch.testing.assert_close(alone, in_batch, atol=1e-6, rtol=0)
    torch.testing.assert_close(alone, other, atol=1e-6, rtol=0)
    assert torch.equal(alone, again)


def test_empty_sentences_and_empty_batch(tiny_bilm):
    with torch.no_grad():
        out = tiny_bilm(batch_to_ids([[], ["x"], []]))
        assert out.layers.shape == (3, 3, 1, TINY_OPTIONS.output_dim)
        assert out.mask.tolist() == [[False], [True], [False]]
        alone = tiny_bilm(batch_to_ids([["x"]])).layers[:, 0, 0]
        torch.testing.assert_close(out.layers[:, 1, 0], alone, atol=1e-6, rtol=0)
        assert not out.layers[:, [0, 2]].any()  # empty sentences give zeros, not noise
        empty = tiny_bilm(batch_to_ids([[]]))
        assert empty.layers.shape == (3, 1, 0, TINY_OPTIONS.output_dim)


def test_weights_roundtrip_is_identical(tmp_path, tiny_bilm):
    save_bilm(tiny_bilm, tmp_path / "a")
    loaded = load_bilm(tmp_path / "a")
    for (name, p), (_, q) in zip(tiny_bilm.state_dict().items(),
                                 loaded.state_dict().items(), strict=True):
        assert torch.equal(p, q), name
    save_bilm(loaded, tmp_path / "b")
    import h5py
    with h5py.File(tmp_path / "a" / "weights.hdf5") as fa, \
            h5py.File(tmp_path / "b" / "weights.hdf5") as fb:
        names = []
        fa.visit(lambda n: names.append(n) if isinstance(fa[n], h5py.Dataset) else None)
        assert "RNN_1/RNN/MultiRNNCell/Cell1/LSTMCell/W_0" in names
        for n in names:
            np.testing.assert_array_equal(fa[n][...], fb[n][...])
    assert BiLMOptions.from_file(tmp_path / "b") == tiny_bilm.options


def test_fixture_weights_roundtrip(tmp_path, fixture_dir):
    import h5py
    bilm = load_bilm(fixture_dir / "lm_weights.hdf5", fixture_dir / "options.json")
    save_bilm(bilm, tmp_path)
    with h5py.File(fixture_dir / "lm_weights.hdf5") as fa, \
            h5py.File(tmp_path / "weights.hdf5") as fb:
        names_a, names_b = [], []
        fa.visit(lambda n: names_a.append(n) if isinstance(fa[n], h5py.Dataset) else None)
        fb.visit(lambda n: names_b.append(n) if isinstance(fb[n], h5py.Dataset) else None)
        assert sorted(names_a) == sorted(names_b) and "CNN_high_1/W_carry" in names_a
        for name in names_a:
            np.testing.assert_array_equal(fa[name][...], fb[name][...], err_msg=name)


def test_word_cache_is_exact_and_never_stale(tiny_bilm):
    ids = batch_to_ids(SENTS)
    cached = make_random_bilm()
    cached.word_cache = WordCache(max_entries=1000)
    with torch.no_grad():
        plain = tiny_bilm(ids).layers
        first = cached(ids).layers
        assert cached.word_cache.misses > 0 and len(cached.word_cache) > 0
        second = cached(ids).layers
        assert cached.word_cache.hits > 0
        torch.testing.assert_close(first, plain, atol=1e-6, rtol=0)
        torch.testing.assert_close(second, plain, atol=1e-6, rtol=0)
        # weights change in place: the cache must notice
        cached.encoder.projection.bias.add_(1.0)
        changed = cached(ids).layers
        cached.word_cache.clear()
        fresh = cached(ids).layers
    assert not torch.allclose(changed, plain)
    torch.testing.assert_close(changed, fresh, atol=1e-6, rtol=0)
    # load_state_dict back: same as the original again
    cached.load_state_dict(tiny_bilm.state_dict())
    with torch.no_grad():
        torch.testing.assert_close(cached(ids).layers, plain, atol=1e-6, rtol=0)


def test_word_cache_is_bounded(tiny_bilm):
    tiny_bilm.word_cache = WordCache(max_entries=5)
    with torch.no_grad():
        tiny_bilm(batch_to_ids(SENTS))
    assert len(tiny_bilm.word_cache) == 5


def test_word_cache_bypassed_when_training(tiny_bilm):
    tiny_bilm.word_cache = WordCache(max_entries=100)
    out = tiny_bilm(batch_to_ids(SENTS))
    out.layers.sum().backward()
    assert len(tiny_bilm.word_cache) == 0
    assert tiny_bilm.encoder.conv_weights[0].grad is not None


def test_gradients_reach_all_parameters(tiny_bilm):
    out = tiny_bilm(batch_to_ids(SENTS))
    (out.layers ** 2).sum().backward()
    for name, p in tiny_bilm.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, name


def test_weights_loaded_in_place_or_moved_reach_every_cache():
    """Weights loaded into a biLM in place under inference mode (its tensors then have no
    version counter) were not seen by the word cache: it served the old weights' vectors."""
    torch.manual_seed(0)
    bilm = make_random_bilm()
    other = make_random_bilm(seed=5)
    bilm.word_cache = WordCache(100)
    ids = batch_to_ids([["The", "bank", "."]])
    with torch.inference_mode():
        bilm.to(torch.float32)  # inference tensors from here on
        bilm(ids)  # fills the word cache
        bilm.load_state_dict(other.state_dict())
        after = bilm(ids).layers
    expected = copy.deepcopy(other).eval()
    with torch.inference_mode():
        torch.testing.assert_close(after, expected(ids).layers)
    version = bilm.version.key()
    bilm.to(torch.float32)
    assert bilm.version.key() != version  # a move or cast is a new version
