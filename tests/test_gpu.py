"""GPU paths (skipped without CUDA; run by benchmarks/gpu_check.sh on a CUDA machine)."""

import numpy as np
import pytest
import torch

from spacy_elmo.bilm import StatefulBiLM, batch_to_ids, load_bilm

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
        holder = gpu.get_pipe("elmo").model.layers[0].shims[0]._model
        assert next(holder.parameters()).is_cuda
    finally:
        require_cpu()
