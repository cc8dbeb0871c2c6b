"""The bidirectional language model: token encoder, two LSTM stacks, L+1 output layers."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, List, Optional, Tuple

import numpy as np
import torch
from torch import nn

from ..errors import ElmoError, Errors
from .chars import CharIds
from .dictionary import DictionaryIds, TokenDictionary
from .encoder import CharCNNEncoder
from .fork import guard_forks
from .lstm import BiLSTMStack, LSTMState
from .options import BiLMOptions
from .precision import check_precision
from .stamp import WeightsVersion
from .windows import WORD_CACHE


@dataclass
class BiLMOutput:
    """layers: (L+1, batch, tokens, 2*proj), boundaries removed, zero at padding.
    mask: (batch, tokens) bool, True for real tokens."""

    layers: torch.Tensor
    mask: torch.Tensor


class WordCache:
    """Token-encoder outputs keyed by a token's character ids.

    Exact: a hit returns what the encoder computes for those ids now. Entries are dropped
    whenever the weights' version changes (`stamp.WeightsVersion`), and the cache is bounded
    by `max_entries`.
    """

    def __init__(self, max_entries: int = WORD_CACHE) -> None:
        self.max_entries = max_entries
        self._entries: OrderedDict[bytes, torch.Tensor] = OrderedDict()
        self._stamp: Optional[Tuple] = None
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        self._entries.clear()

    def __getstate__(self) -> dict:
        # a cache is rebuilt where it is used: a pickled model (joblib, multiprocessing)
        # stays the size of its weights
        return dict(self.__dict__, _entries=OrderedDict(), _stamp=None)

    def lookup(self, encoder: CharCNNEncoder, char_ids: torch.Tensor) -> torch.Tensor:
        """Encode (n, max_chars) ids, computing only the rows not seen before."""
        stamp = encoder.version.key()
        if stamp != self._stamp:
            self._entries.clear()
            self._stamp = stamp
        unique, inverse = torch.unique(char_ids, dim=0, return_inverse=True)
        keys = [row.tobytes() for row in unique.cpu().numpy().astype(np.int32)]
        missing = [i for i, key in enumerate(keys) if key not in self._entries]
        self.misses += len(missing)
        self.hits += len(keys) - len(missing)
        if missing:
            fresh = encoder(unique[missing])
            for i, vec in zip(missing, fresh, strict=True):
                # a copy: a row view would keep (and pickle) the whole batch's storage
                self._entries[keys[i]] = vec.clone()
        else:
            for key in keys:
                self._entries.move_to_end(key)
        vectors = torch.stack([self._entries[key] for key in keys])
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)
        return vectors[inverse]


class BiLM(nn.Module):
    """ELMo's biLM. `forward` is deterministic: every sentence starts from a zero state.

    Byte characters (bilm-tf, AllenNLP) by default; with a `dictionary` (and options saying
    so), the ELMoForManyLangs variant: dictionary characters and words. `token_ids()` maps
    tokens to the id rows this model reads.
    """

    bos_ids: torch.Tensor
    eos_ids: torch.Tensor

    def __init__(self, options: BiLMOptions, word_cache_size: int = 0,
                 dictionary: Optional[TokenDictionary] = None) -> None:
        super().__init__()
        _check_dictionary(options, dictionary)
        self.options = options
        self.dictionary = dictionary
        ids = self.token_ids()
        # Normal tensors even when built under torch.inference_mode() (as serving code
        # often loads weights): the word cache tracks their version counters.
        with torch.inference_mode(False):
            self.encoder = CharCNNEncoder(options, pad_id=ids.pad_id)
            self.lstm = BiLSTMStack(options)
        # the one version of the weights every cache compares, shared with the parts
        self.version = WeightsVersion(self)
        for part in (self.encoder, *self.lstm.layers):
            part.version = self.version
        self.register_buffer("bos_ids", torch.from_numpy(ids.bos), persistent=False)
        self.register_buffer("eos_ids", torch.from_numpy(ids.eos), persistent=False)
        self.word_cache: Optional[WordCache] = (
            WordCache(word_cache_size) if word_cache_size > 0 else None)

    def token_ids(self) -> CharIds:
        """A new mapper from tokens to this model's id rows."""
        C = self.options.max_characters_per_token
        return CharIds(C) if self.dictionary is None else DictionaryIds(self.dictionary, C)

    @property
    def device(self) -> torch.device:
        """Where the weights are (inputs must go there too)."""
        return self.encoder.projection.weight.device

    @property
    def dropout(self) -> float:
        return float(self.lstm.dropout.p)

    def set_dropout(self, rate: float) -> None:
        self.lstm.dropout.p = rate

    @property
    def precision(self) -> str:
        """The inference precision (calls without gradients): "fp32", "bf16" or "int8"
        (precision.py)."""
        return self.encoder.precision

    @property
    def training_precision(self) -> str:
        """The precision of calls with gradients: "fp32" or "bf16"."""
        return self.encoder.training_precision

    def set_precision(self, precision: str) -> None:
        """Run inference in `precision` from now on (training: `set_training_precision`).
        E150-E152 and E230 where this machine can't."""
        check_precision(precision, self.device)
        if precision != self.precision:
            self.version.bump()  # what was computed came from the other precision
        self.encoder.precision = precision
        self.lstm.set_precision(precision)

    def set_training_precision(self, precision: str) -> None:
        """Run calls with gradients in `precision` ("fp32", or "bf16": bf16 products over
        the fp32 master weights). E231, or E230 where bf16 would be emulated."""
        check_precision(precision, self.device, training=True)
        self.encoder.training_precision = precision
        self.lstm.set_precision(precision, training=True)

    def _load_from_state_dict(self, *args: Any, **kwargs: Any) -> None:
        # weights loaded into this biLM in place: what was computed from the old ones goes
        # (under inference mode torch's version counters would not see the writes)
        self.version.bump()
        super()._load_from_state_dict(*args, **kwargs)

    def _apply(self, fn: Any, *args: Any, **kwargs: Any) -> BiLM:
        # `.to()`, `.cuda()`, `.half()`: new tensors, which a reused address could hide
        result = super()._apply(fn, *args, **kwargs)
        self.version.bump()
        return result

    def weights_changed(self) -> None:
        """Say that the weights changed where torch's version counters do not see it
        (thinc's optimizers write into the parameters' memory): every cache of what was
        computed from them (word cache, int8 and bf16 copies, the component's output
        cache) compares `version`, which moves on."""
        self.version.bump()

    def encode_tokens(self, char_ids: torch.Tensor) -> torch.Tensor:
        """Context-independent vectors of (n, max_chars) ids -> (n, proj).

        Without gradients, each distinct token is encoded once (through the word cache
        when there is one)."""
        if torch.is_grad_enabled() or char_ids.shape[0] == 0:
            return self.encoder(char_ids)
        if self.word_cache is not None:
            return self.word_cache.lookup(self.encoder, char_ids)
        unique, inverse = torch.unique(char_ids, dim=0, return_inverse=True)
        return self.encoder(unique)[inverse]

    def embed_sequence(self, char_ids: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        """(batch, steps, chars) ids -> token vectors (batch, steps, proj), zero at padding,
        and the lengths (batch,)."""
        self._check_ids(char_ids)
        mask = (char_ids > 0).any(-1)
        flat = self.encode_tokens(char_ids[mask])
        x = flat.new_zeros(char_ids.shape[0], char_ids.shape[1], flat.shape[-1])
        x[mask] = flat
        return x, mask.sum(-1)

    def add_boundaries(self, char_ids: torch.Tensor) -> torch.Tensor:
        """Put `<S>` before and `</S>` after every row's real tokens."""
        self._check_ids(char_ids)
        rows, steps, chars = char_ids.shape
        lengths = (char_ids > 0).any(-1).sum(-1)
        out = char_ids.new_zeros(rows, steps + 2, chars)
        out[:, 1 : steps + 1] = char_ids
        out[:, 0] = self.bos_ids
        out[torch.arange(rows, device=char_ids.device), lengths + 1] = self.eos_ids
        return out

    def forward(self, char_ids: torch.Tensor, state: Optional[LSTMState] = None
                ) -> BiLMOutput:
        return self.run(char_ids, state)[0]

    def run(self, char_ids: torch.Tensor, state: Optional[LSTMState] = None
            ) -> Tuple[BiLMOutput, LSTMState]:
        """(batch, tokens, chars) shifted ids without boundaries -> outputs, final state."""
        if torch.get_num_threads() > 1:
            guard_forks()  # forked children of this process then run one torch thread
        with_bounds = self.add_boundaries(char_ids)
        x, lengths = self.embed_sequence(with_bounds)
        reverse = reverse_index(lengths, x.shape[1])
        x_bwd = x.gather(1, reverse[:, :, None].expand_as(x))
        layer_outs, final = self.lstm(x, x_bwd, lengths, state)
        rows, steps = char_ids.shape[:2]
        layers: List[torch.Tensor] = [torch.cat([x, x], dim=-1)]
        for out in layer_outs:
            bwd = out[1].gather(1, reverse[:, :, None].expand_as(out[1]))
            layers.append(torch.cat([out[0], bwd], dim=-1))
        stacked = torch.stack(layers)[:, :, 1 : steps + 1]
        mask = (char_ids > 0).any(-1)
        stacked = stacked * mask[None, :, :, None].to(stacked.dtype)
        return BiLMOutput(stacked, mask), final

    def _check_ids(self, char_ids: torch.Tensor) -> None:
        C = self.bos_ids.shape[-1]
        if (char_ids.dim() != 3 or char_ids.shape[-1] != C
                or char_ids.dtype not in (torch.int64, torch.int32)):
            raise ElmoError(Errors.E013.format(n_chars=C, shape=tuple(char_ids.shape),
                                               dtype=char_ids.dtype))


def _check_dictionary(options: BiLMOptions, dictionary: Optional[TokenDictionary]) -> None:
    """The options and the dictionary (or its absence) must describe the same model."""
    if dictionary is None:
        found = None
    else:
        found = (len(dictionary.chars) + 1, len(dictionary.words) + 1 if dictionary.words else 0)
    expected = None if options.char_vocabulary == "bytes" else (
        options.n_characters, options.n_words if options.word_dim else 0)
    if found != expected:
        def say(sizes: Optional[Tuple[int, int]]) -> str:
            return "byte characters" if sizes is None else (
                f"{sizes[0]} character and {sizes[1]} word embedding rows")

        raise ElmoError(Errors.E037.format(options=say(expected), dictionary=say(found)))


def reverse_index(lengths: torch.Tensor, steps: int) -> torch.Tensor:
    """(rows, steps) gather index that reverses each row's first `lengths[r]` steps."""
    t = torch.arange(steps, device=lengths.device)[None, :]
    n = lengths[:, None]
    return torch.where(t < n, n - 1 - t, t)


class StatefulBiLM:
    """The reference stateful mode of AllenNLP and bilm-tf.

    Each batch row keeps the final LSTM state of the same row in the previous call; rows
    absent from a smaller batch keep theirs. `reset_state()` starts over.
    """

    def __init__(self, bilm: BiLM, max_rows: int = 4096) -> None:
        self.bilm = bilm
        self.max_rows = max_rows
        self._state: Optional[LSTMState] = None

    def reset_state(self) -> None:
        self._state = None

    def __call__(self, char_ids: torch.Tensor) -> BiLMOutput:
        rows = char_ids.shape[0]
        if rows > self.max_rows:
            raise ElmoError(Errors.E014.format(max_rows=self.max_rows, rows=rows))
        if self._state is None or self._state.h.shape[2] < rows:
            fresh = LSTMState.zeros(self.bilm.options, rows, char_ids.device,
                                    self.bilm.encoder.projection.weight.dtype)
            if self._state is not None:
                old = self._state.h.shape[2]
                fresh.h[:, :, :old] = self._state.h
                fresh.c[:, :, :old] = self._state.c
            self._state = fresh
        state = LSTMState(self._state.h[:, :, :rows], self._state.c[:, :, :rows])
        output, final = self.bilm.run(char_ids, state)
        final = final.detach()
        self._state.h[:, :, :rows] = final.h
        self._state.c[:, :, :rows] = final.c
        return output
