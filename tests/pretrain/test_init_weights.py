"""Domain adaptation and continued runs: start from a published biLM or an export."""

import pytest
import torch

from spacy_elmo.bilm import batch_to_ids, load_bilm
from spacy_elmo.bilm.options import OPTION_RULES
from spacy_elmo.errors import ElmoError
from spacy_elmo.pretrain import ddp
from spacy_elmo.pretrain.batches import BatchMaker, dev_batches
from spacy_elmo.pretrain.perplexity import evaluate_lm, load_lm
from spacy_elmo.pretrain.trainer import Trainer, train
from spacy_elmo.pretrain.vocab import Vocab

from .conftest import tiny_config


def test_init_weights_loads_the_bilm_and_seeds_the_softmax(tmp_path, tiny_weights_dir):
    config = tiny_config(tmp_path, init_weights=str(tiny_weights_dir), options={})
    trainer = Trainer.start(config, ddp.setup("cpu"), overwrite=False, progress=False)
    published = load_bilm(tiny_weights_dir)
    pairs = zip(trainer.model.bilm.named_parameters(), published.parameters(), strict=True)
    for (name, a), b in pairs:
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
    adapted, published = load_bilm(tmp_path / "run" / "model"), load_bilm(tiny_weights_dir)
    assert adapted.options == published.options
    # trained from the published weights: moved by 3 small steps, not a fresh start
    moved, total = 0.0, 0.0
    for a, b in zip(adapted.parameters(), published.parameters(), strict=True):
        moved += float((a - b).norm() ** 2)
        total += float(b.norm() ** 2)
    assert 0 < moved < 0.01 * total


def test_init_weights_from_an_export_keeps_its_softmax_and_vocabulary(tmp_path):
    first = train(tiny_config(made(tmp_path / "a"), max_steps=4), progress=False)
    export = tmp_path / "a" / "run" / "model"
    config = tiny_config(made(tmp_path / "b"), init_weights=str(export), options={})
    trainer = Trainer.start(config, ddp.setup("cpu"), overwrite=False, progress=False)
    assert trainer.vocab.words == first_vocab(export)
    assert torch.equal(trainer.model.softmax.weight, first.model.softmax.weight)
    assert torch.equal(trainer.model.softmax.bias, first.model.softmax.bias)
    lm, _ = load_lm(export)
    sentences = [["the", "cat"], ["a", "dog", "sat"]]
    assert perplexity_of(trainer.model, trainer.vocab, sentences) == pytest.approx(
        perplexity_of(lm, trainer.vocab, sentences), rel=1e-6)


def test_init_weights_with_another_vocabulary_keeps_the_rows_of_shared_words(tmp_path):
    train(tiny_config(made(tmp_path / "a"), max_steps=2), progress=False)
    export = tmp_path / "a" / "run" / "model"
    lm, old_vocab = load_lm(export)
    words = old_vocab.words[:3] + ["zebra", "quokka"] + old_vocab.words[10:3:-1]
    vocab_file = tmp_path / "new_vocab.txt"
    Vocab(words).to_file(vocab_file)
    config = tiny_config(made(tmp_path / "b"), init_weights=str(export), options={},
                         vocab=str(vocab_file))
    trainer = Trainer.start(config, ddp.setup("cpu"), overwrite=False, progress=False)
    new = trainer.vocab
    weight = trainer.model.softmax.weight.detach()
    for word in old_vocab.words[4:11]:
        assert torch.equal(weight[new[word]], lm.softmax.weight[old_vocab[word]].detach()), word
    ids = batch_to_ids([["zebra", "quokka"]])[0]
    with torch.no_grad():
        vectors = lm.bilm.encoder(ids)
    rows = weight[[new["zebra"], new["quokka"]]]
    cosine = torch.nn.functional.cosine_similarity(rows, vectors)
    assert torch.allclose(cosine, torch.ones(2), atol=1e-5)
    assert float(trainer.model.softmax.bias.detach()[new["zebra"]]) == 0.0


def test_init_weights_from_an_export_missing_its_softmax_is_refused(tmp_path):
    train(tiny_config(made(tmp_path / "a"), max_steps=2), progress=False)
    export = tmp_path / "a" / "run" / "model"
    (export / "softmax.hdf5").unlink()
    config = tiny_config(made(tmp_path / "b"), init_weights=str(export), options={})
    with pytest.raises(ElmoError, match=r"\[E115\] .* has no softmax.hdf5"):
        Trainer.start(config, ddp.setup("cpu"), overwrite=False, progress=False)


def first_vocab(export):
    return Vocab.from_file(export / "vocab.txt").words


def perplexity_of(model, vocab, sentences):
    maker = BatchMaker(vocab, model.bilm.options.max_characters_per_token)
    return evaluate_lm(model, dev_batches(sentences, maker, rows=2, window=3))["dev_ppl"]


def made(directory):
    directory.mkdir(parents=True, exist_ok=True)
    return directory


def test_init_weights_with_a_preset_of_another_shape_is_refused(tmp_path, tiny_weights_dir):
    """Issue 31: `--init-weights W --preset small` trained W's shape while config.json
    recorded `small`; now refused before anything is written, as conflicting options are."""
    config = tiny_config(tmp_path, init_weights=str(tiny_weights_dir), options={},
                         preset="small")
    with pytest.raises(ElmoError, match=r"\[E128\] preset 'small' asks for another shape than "
                                        r"the init_weights biLM .*lstm_dim 1024 vs 12"):
        train(config, progress=False)
    assert not (tmp_path / "run").exists()
    # a preset (with options) that describes the weights' own shape is no conflict
    found = load_bilm(tiny_weights_dir).options.as_dict()
    shape = {key: found[key] for key in OPTION_RULES}
    same = tiny_config(made(tmp_path / "b"), init_weights=str(tiny_weights_dir),
                       preset="tiny", options=shape, max_steps=1)
    assert train(same, progress=False).step == 1


def test_init_weights_on_the_command_line_with_a_preset(tmp_path, tiny_weights_dir):
    from typer.testing import CliRunner

    from spacy_elmo.cli import app

    (tmp_path / "c.txt").write_text("the cat sat .\n" * 20)
    result = CliRunner().invoke(app, ["pretrain", str(tmp_path / "c.txt"), "-o",
                                      str(tmp_path / "run"), "--init-weights",
                                      str(tiny_weights_dir), "--preset", "small",
                                      "--n-negatives", "4", "--max-steps", "1"])
    assert result.exit_code == 1 and "[E128]" in result.stderr, result.output
    assert not (tmp_path / "run").exists()
