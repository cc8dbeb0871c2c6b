"""GPU paths (skipped without CUDA; run by benchmarks/gpu_check.sh on a CUDA machine)."""

import numpy as np
import pytest
import torch

from spacy_elmo.bilm import StatefulBiLM, batch_to_ids, load_bilm
from spacy_elmo.ml.elmo_model import get_holder

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


def test_fixture_on_gpu(fixture_dir, fixture_sentences):
    import h5py

    bilm = load_bilm(fixture_dir / "lm_weights.hdf5", fixture_dir / "options.json").cuda()
    runner = StatefulBiLM(bilm)
    with torch.inference_mode():
        for i in range(10):
            batch = [fixture_sentences[k][i].split() for k in range(3)]
            out = runner(batch_to_ids(batch).cuda())
            for k, tokens in enumerate(batch):
                with h5py.File(fixture_dir / f"lm_embeddings_{k}.hdf5", "r") as f:
                    exp = np.concatenate(list(f[str(i)][...]), axis=-1)
                got = out.layers[2, k, : len(tokens)].cpu().numpy()
                np.testing.assert_allclose(got, exp, atol=1e-5, rtol=1e-4)


def test_component_on_gpu_matches_cpu(fixture_dir):
    import spacy
    from thinc.api import require_cpu, require_gpu

    config = {"weights": str(fixture_dir / "lm_weights.hdf5"), "store_layers": True}
    text = "The bank raised rates. We sat on the river bank."
    require_cpu()
    cpu = spacy.blank("en")
    cpu.add_pipe("elmo", config=config)
    expected = cpu(text)._.elmo_layers
    require_gpu(0)
    try:
        gpu = spacy.blank("en")
        gpu.add_pipe("elmo", config=config)
        doc = gpu(text)
        assert isinstance(doc._.elmo_layers, np.ndarray)
        np.testing.assert_allclose(doc._.elmo_layers, expected, atol=1e-5)
        holder = get_holder(gpu.get_pipe("elmo").model)
        assert next(holder.parameters()).is_cuda
    finally:
        require_cpu()


def autograd_and_fused_grads(bilm):
    """(autograd, fused) pairs of the LSTM's input and parameter gradients on one GPU batch."""
    x = torch.randn(2, 8, 12, bilm.options.projection_dim, device="cuda")
    lengths = torch.tensor([12, 12, 9, 12, 3, 12, 12, 1], device="cuda")
    grads = []
    for fused in (False, True):
        bilm.zero_grad()
        bilm.lstm.set_fused_backward(fused)
        xx = x.clone().requires_grad_(True)
        outputs, _ = bilm.lstm(xx[0], xx[1], lengths)
        sum((o * (k + 1)).sum() for k, o in enumerate(outputs)).backward()
        grads.append([xx.grad] + [p.grad.clone() for p in bilm.lstm.parameters()])
    return list(zip(*grads, strict=True))


def test_fused_lstm_backward_on_gpu_matches_autograd():
    from spacy_elmo.bilm import BiLM, preset

    torch.manual_seed(0)
    bilm = BiLM(preset("tiny")).cuda()
    for a, b in autograd_and_fused_grads(bilm):
        torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-5 * float(a.abs().max()))


def test_bf16_pretraining_step_on_gpu(tmp_path):
    from spacy_elmo.pretrain.trainer import train
    from tests.pretrain.conftest import tiny_config

    result = train(tiny_config(tmp_path, device="cuda", precision="bf16", max_steps=4),
                   progress=False)
    assert result.step == 4
    assert next(result.model.parameters()).dtype == torch.float32


def test_bf16_inference_on_gpu_is_close_to_fp32(fixture_dir, fixture_sentences):
    """The native bf16 path (bf16 copies, gate sums in fp32) on a GPU with bf16."""
    import torch.nn.functional as F

    if not torch.cuda.is_bf16_supported(including_emulation=False):
        pytest.skip("this GPU has no native bf16")
    bilm = load_bilm(fixture_dir / "lm_weights.hdf5", fixture_dir / "options.json").cuda()
    ids = batch_to_ids([s.split() for s in fixture_sentences[0]]).cuda()
    mask = (ids > 0).any(-1)
    with torch.inference_mode():
        fp32 = bilm(ids).layers
        bilm.set_precision("bf16")
        out = bilm(ids).layers
    assert out.dtype == torch.float32 and not torch.equal(out, fp32)
    for k in range(out.shape[0]):
        assert F.cosine_similarity(fp32[k][mask], out[k][mask], dim=-1).min() > 0.99


def test_bf16_fused_lstm_backward_on_gpu_matches_autograd():
    from spacy_elmo.bilm import BiLM, preset

    if not torch.cuda.is_bf16_supported(including_emulation=False):
        pytest.skip("this GPU has no native bf16")
    torch.manual_seed(0)
    bilm = BiLM(preset("tiny")).cuda()
    bilm.set_training_precision("bf16")
    for a, b in autograd_and_fused_grads(bilm):
        assert b.dtype == torch.float32
        torch.testing.assert_close(b, a, rtol=0, atol=2e-2 * float(a.abs().max()))
