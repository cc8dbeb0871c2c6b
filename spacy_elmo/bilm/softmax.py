"""The language-model softmax of biLM training: sampled for training, full for evaluation.

One softmax (a (vocab, dim) weight and a bias) is shared by the forward and the backward LM.
The sampled loss draws negatives from a log-uniform (Zipf) distribution over the vocabulary,
which must be sorted by descending frequency, corrects every logit by the log of its
expected count (the standard sampled-softmax estimator) and masks accidental hits (a sampled
class equal to the row's target).
"""

from __future__ import annotations

import math
from typing import Optional, Tuple

import torch
import torch.nn.functional as F
from torch import nn

from . import bf16


class LogUniformSampler:
    """Draws class ids with P(k) = log((k + 2) / (k + 1)) / log(n + 1)."""

    def __init__(self, n_classes: int) -> None:
        self.n_classes = n_classes
        self._log_n1 = math.log(n_classes + 1)

    def probability(self, ids: torch.Tensor) -> torch.Tensor:
        ids = ids.to(torch.float64)
        return (torch.log1p(1.0 / (ids + 1.0)) / self._log_n1).to(torch.float32)

    def sample(self, n_draws: int, *, device: torch.device,
               generator: Optional[torch.Generator] = None) -> Tuple[torch.Tensor, torch.Tensor]:
        """`n_draws` draws with replacement, made unique: (ids, log expected count) where the
        expected count is each id's probability of appearing among the draws."""
        u = torch.rand(n_draws, generator=generator, dtype=torch.float64)
        ids = (torch.exp(u * self._log_n1).floor().long() - 1).clamp_(0, self.n_classes - 1)
        ids = torch.unique(ids).to(device)
        return ids, self.log_expected_count(ids, n_draws)

    def log_expected_count(self, ids: torch.Tensor, n_draws: int) -> torch.Tensor:
        p = self.probability(ids).to(torch.float64)
        return torch.log(-torch.expm1(n_draws * torch.log1p(-p))).to(torch.float32)


class LMSoftmax(nn.Module):
    """Weight (vocab, dim) and bias (vocab,); losses are sums over the non-ignored rows.
    `training_precision` "bf16": the sampled logits' product in bf16 (sums in fp32)."""

    def __init__(self, n_vocab: int, dim: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(n_vocab, dim))
        self.bias = nn.Parameter(torch.zeros(n_vocab))
        self.sampler = LogUniformSampler(n_vocab)
        self.training_precision = "fp32"
        nn.init.normal_(self.weight, std=1.0 / math.sqrt(dim))

    def full_nll(self, hidden: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """(n,) negative log-likelihoods under the full softmax; 0 where the target is -1."""
        logits = F.linear(hidden, self.weight, self.bias)
        return F.cross_entropy(logits, targets, ignore_index=-1, reduction="none")

    def sampled_nll(self, hidden: torch.Tensor, targets: torch.Tensor, *, n_negatives: int,
                    generator: Optional[torch.Generator] = None) -> torch.Tensor:
        """(n,) sampled-softmax losses of (n, dim) hidden states (one draw of negatives for
        all rows); 0 where the target is -1."""
        keep = targets >= 0
        safe = targets.clamp(min=0)
        sampled, log_q_sampled = self.sampler.sample(n_negatives, device=hidden.device,
                                                     generator=generator)
        log_q_true = self.sampler.log_expected_count(safe, n_negatives).to(hidden.device)
        true_logits = ((hidden * self.weight[safe]).sum(-1) + self.bias[safe]
                       - log_q_true.to(hidden.dtype))
        offset = self.bias[sampled] - log_q_sampled.to(hidden.dtype)
        if self.training_precision == "bf16":
            sampled_logits = bf16.Bf16Linear(bf16.copy(self.weight[sampled].t()), offset)(hidden)
        else:
            sampled_logits = torch.addmm(offset, hidden, self.weight[sampled].t())
        # `sampled` is sorted and unique: each row has at most one accidental hit
        col = torch.searchsorted(sampled, safe).clamp_(max=len(sampled) - 1)
        row = torch.nonzero(sampled[col] == safe).squeeze(1)
        sampled_logits.index_put_((row, col[row]),
                                  torch.tensor(torch.finfo(hidden.dtype).min,
                                               dtype=hidden.dtype, device=hidden.device))
        # in fp32 whatever the matmuls ran in (a caller's bf16 autocast)
        true_logits, sampled_logits = true_logits.float(), sampled_logits.float()
        nll = torch.logaddexp(true_logits, torch.logsumexp(sampled_logits, dim=1)) - true_logits
        return nll * keep.to(nll.dtype)
