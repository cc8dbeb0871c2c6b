"""Domain adaptation: start from a published options/weights pair."""

import torch

from spacy_elmo.bilm import batch_to_ids, load_bilm
from spacy_elmo.pretrain import ddp
from spacy_elmo.pretrain.trainer import Trainer, train

from .conftest import tiny_config


def test_init_weights_loads_the_bilm_and_seeds_the_softmax(tmp_path, tiny_weights_dir):
    config = tiny_config(tmp_path, init_weights=str(tiny_weights_dir), options={})
    trainer = Trainer.start(config, ddp.setup("cpu"), overwrite=False, progress=False)
    published = load_bilm(tiny_weights_dir)
    for (name, a), b in zip(trainer.model.bilm.named_parameters(), published.parameters()):
        assert torch.equal(a, b), name
    vocab = trainer.vocab
    ids = batch_to_ids([[vocab.words[5], vocab.words[6]]])[0]
    with torch.no_grad():
        vectors = published.encoder(ids)
    weight = trainer.model.softmax.weight.detach()
    cosine = torch.nn.functional.cosine_similarity(weight[5:7], vectors)
    assert torch.allclose(cosine, torch.ones(2), atol=1e-5)
    assert float(trainer.model.softmax.bias.detach().abs().sum()) == 0.0


def test_adapted_model_trains_from_the_published_weights(tmp_path, tiny_weights_dir):
    result = train(tiny_config(tmp_path, init_weights=str(tiny_weights_dir), options={},
                               max_steps=3), progress=False)
    assert result.step == 3
    adapted = load_bilm(tmp_path / "run" / "model")
    assert adapted.options == load_bilm(tiny_weights_dir).options
