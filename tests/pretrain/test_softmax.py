import math

import torch

from spacy_elmo.bilm.softmax import LMSoftmax, LogUniformSampler


def test_log_uniform_is_a_distribution_favouring_frequent_ids():
    sampler = LogUniformSampler(1000)
    p = sampler.probability(torch.arange(1000))
    assert math.isclose(float(p.sum()), 1.0, rel_tol=1e-5)
    assert bool((p[:-1] >= p[1:]).all())
    torch.manual_seed(0)
    ids, log_q = sampler.sample(200, device=torch.device("cpu"))
    assert len(ids) == len(set(ids.tolist())) and int(ids.max()) < 1000
    assert bool((log_q <= 0).all())
    assert (ids < 10).sum() > (ids >= 990).sum()


def test_full_nll_is_log_softmax():
    torch.manual_seed(0)
    softmax = LMSoftmax(20, 4)
    hidden, targets = torch.randn(3, 4), torch.tensor([1, 7, -1])
    logits = hidden @ softmax.weight.T + softmax.bias
    expected = -torch.log_softmax(logits, -1)[torch.arange(2), targets[:2]]
    nll = softmax.full_nll(hidden, targets)
    assert torch.allclose(nll[:2], expected, atol=1e-6) and float(nll[2].detach()) == 0.0


def test_accidental_hits_are_removed():
    """A target that is also drawn as a negative does not count against itself: with all
    classes drawn, the sampled loss equals the corrected full loss over the other classes."""
    torch.manual_seed(0)
    softmax = LMSoftmax(5, 3)
    hidden, targets = torch.randn(4, 3), torch.tensor([0, 1, 2, 4])
    nll = softmax.sampled_nll(hidden, targets, n_negatives=500)  # draws every class
    log_q = softmax.sampler.log_expected_count(torch.arange(5), 500)
    logits = hidden @ softmax.weight.T + softmax.bias - log_q
    expected = -torch.log_softmax(logits, -1)[torch.arange(4), targets]
    assert torch.allclose(nll, expected, atol=1e-5)
    nll.sum().backward()
    assert softmax.weight.grad is not None
