import torch

from spacy_elmo.bilm import BiLM
from spacy_elmo.bilm.lm import BiLanguageModel
from spacy_elmo.pretrain.batches import BatchMaker, TrainStreams, take
from spacy_elmo.pretrain.corpus import SentenceSource, TextSettings
from spacy_elmo.pretrain.vocab import Vocab

from ..conftest import TINY_OPTIONS


def test_windows_carry_the_last_token_and_reverse_sentences(tmp_path):
    assert take([["a", "b"], ["c", "d", "e"]], 4) == ["a", "b", "c", "d"]
    path = tmp_path / "c.txt"
    path.write_text("x y z\nu v\n", encoding="utf-8")
    vocab = Vocab(["x", "y", "z", "u", "v"])
    streams = TrainStreams(SentenceSource([path], TextSettings(), shuffle=False),
                           BatchMaker(vocab, 50), rows=1, window=4)
    first, second = streams.next_batch(), streams.next_batch()
    words = vocab.words
    fwd_targets = [words[i] for i in first.targets[0, 0].tolist()]
    bwd_targets = [words[i] for i in first.targets[1, 0].tolist()]
    assert fwd_targets == ["x", "y", "z", "</S>"]
    assert bwd_targets == ["z", "y", "x", "<S>"]
    assert [words[i] for i in second.targets[0, 0].tolist()] == ["<S>", "u", "v", "</S>"]
    # the first input of a window is the last target of the previous one
    assert first.lengths.tolist() == [4] and first.chars.shape[0] == 5


def test_eval_mode_uses_the_full_softmax_and_sums_per_direction(tmp_path):
    torch.manual_seed(0)
    path = tmp_path / "c.txt"
    path.write_text("x y z\nu v\n", encoding="utf-8")
    vocab = Vocab(["x", "y", "z", "u", "v"])
    streams = TrainStreams(SentenceSource([path], TextSettings(), shuffle=False),
                           BatchMaker(vocab, 50), rows=2, window=4)
    model = BiLanguageModel(BiLM(TINY_OPTIONS), len(vocab), n_negatives=4).eval()
    with torch.no_grad():
        out = model(streams.next_batch())
    assert out.n_fwd == out.n_bwd == 8
    assert float(out.mean_loss) > 0 and out.state.h.shape == (2, 2, 2, 6)
