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
    char_ids = BatchMaker(vocab, 50).char_ids
    carried = second.chars[second.index[0, 0, 0]]
    assert carried.tolist() == char_ids.token("</S>").tolist()


def test_eval_mode_uses_the_full_softmax_and_sums_per_direction(tmp_path):
    torch.manual_seed(0)
    path = tmp_path / "c.txt"
    path.write_text("x y z\nu v\n", encoding="utf-8")
    vocab = Vocab(["x", "y", "z", "u", "v"])
    streams = TrainStreams(SentenceSource([path], TextSettings(), shuffle=False),
                           BatchMaker(vocab, 50), rows=2, window=4)
    model = BiLanguageModel(BiLM(TINY_OPTIONS), len(vocab), n_negatives=4, dropout=0.1).eval()
    captured = []

    def full_nll(hidden, targets):
        nll = type(model.softmax).full_nll(model.softmax, hidden, targets)
        captured.append(nll)
        return nll

    def sampled_nll(*args, **kwargs):
        raise AssertionError("eval mode sampled the softmax")

    model.softmax.full_nll, model.softmax.sampled_nll = full_nll, sampled_nll
    batch = streams.next_batch()
    with torch.no_grad():
        out = model(batch)
        torch.manual_seed(1)  # the full softmax draws nothing: another seed, the same loss
        again = model(batch)
    assert out.n_fwd == out.n_bwd == 8 and out.state.h.shape == (2, 2, 2, 6)
    nll = captured[0].view(2, -1)
    assert torch.equal(out.loss_fwd, nll[0].sum()) and torch.equal(out.loss_bwd, nll[1].sum())
    assert (nll[batch.targets.view(2, -1) < 0] == 0).all()  # padding targets count nothing
    assert torch.equal(again.loss_fwd, out.loss_fwd) and torch.equal(again.loss_bwd, out.loss_bwd)
    assert float(out.mean_loss) == float(0.5 * (nll[0].sum() / 8 + nll[1].sum() / 8))
