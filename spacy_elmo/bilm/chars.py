"""Tokens to byte-level character ids, exactly as the published ELMo models expect.

Ids are the token's UTF-8 bytes (cut to `max_characters_per_token - 2`), framed by
begin-word/end-word marks and padded; every id is shifted by +1 so that 0 marks a padded
timestep. `<S>` and `</S>` map to the sentence-boundary characters.
"""

from __future__ import annotations

from typing import Dict, Iterable, List, Sequence

import numpy as np
import torch

from ..errors import Warnings, warn

BOS_CHAR = 256
EOS_CHAR = 257
BOW_CHAR = 258
EOW_CHAR = 259
PAD_CHAR = 260
BOS_TOKEN = "<S>"
EOS_TOKEN = "</S>"


def _boundary_row(char: int, max_chars: int) -> np.ndarray:
    row = np.full(max_chars, PAD_CHAR + 1, dtype=np.int64)
    row[:3] = (BOW_CHAR + 1, char + 1, EOW_CHAR + 1)
    return row


class CharIds:
    """Maps tokens to shifted character-id rows; remembers recent tokens.

    Rows are `width` ids wide (`max_characters_per_token`, plus one column for variants with
    a word embedding); `pad_id` is the id of the padding character inside a token, and
    `bos`/`eos` the rows of the sentence boundaries the biLM adds. `token_budget`: how much
    of a token a row holds (UTF-8 bytes here, characters in `DictionaryIds`); longer tokens
    are cut, and `warn_truncation` says so once.
    """

    bos_token = BOS_TOKEN
    eos_token = EOS_TOKEN
    pad_id = PAD_CHAR + 1
    extra_columns = 0

    def __init__(self, max_characters_per_token: int = 50, memo_size: int = 100_000) -> None:
        self.max_chars = max_characters_per_token
        self.token_budget = max_characters_per_token - 2
        self.width = self.max_chars + self.extra_columns
        self.bos = self._row(self.bos_token)
        self.eos = self._row(self.eos_token)
        self._memo_size = memo_size
        self._memo: Dict[str, np.ndarray] = {}
        self._reset_memo()
        self._warned_truncation = False

    def _reset_memo(self) -> None:
        self._memo = {self.bos_token: self.bos, self.eos_token: self.eos}

    def token(self, token: str) -> np.ndarray:
        """The (width,) id row of one token (ids already shifted by +1)."""
        row = self._memo.get(token)
        if row is None:
            row = self._row(token)
            if len(self._memo) >= self._memo_size:
                self._reset_memo()
            self._memo[token] = row
        return row

    def _row(self, token: str) -> np.ndarray:
        if token in (BOS_TOKEN, EOS_TOKEN):
            return _boundary_row(BOS_CHAR if token == BOS_TOKEN else EOS_CHAR, self.max_chars)
        data = token.encode("utf-8", errors="surrogatepass")[: self.token_budget]
        row = np.full(self.max_chars, PAD_CHAR + 1, dtype=np.int64)
        row[0] = BOW_CHAR + 1
        row[1 : 1 + len(data)] = np.frombuffer(data, dtype=np.uint8).astype(np.int64) + 1
        row[1 + len(data)] = EOW_CHAR + 1
        return row

    def __getstate__(self) -> dict:
        # the memo is rebuilt as tokens come: a pickled model stays the size of its weights
        return dict(self.__dict__, _memo={self.bos_token: self.bos, self.eos_token: self.eos})

    def too_long(self, tokens: Iterable[str]) -> List[str]:
        """The tokens whose UTF-8 bytes exceed the budget (they are cut to it)."""
        return [t for t in tokens if len(t) * 4 > self.token_budget
                and len(t.encode("utf-8", errors="surrogatepass")) > self.token_budget]

    def truncation_warning(self, long: List[str]) -> str:
        """The warning for tokens `too_long` found (at least one)."""
        return Warnings.W002.format(n=len(long), limit=self.token_budget,
                                    cjk=self.token_budget // 3, example=long[0][:60])

    def warn_truncation(self, tokens: Iterable[str], stacklevel: int = 1) -> None:
        """Warn, the first time only, when some of `tokens` are cut to the budget;
        `stacklevel` counts from the caller, as `warnings.warn`'s does."""
        if self._warned_truncation:
            return
        long = self.too_long(tokens)
        if long:
            self._warned_truncation = True
            warn(self.truncation_warning(long), stacklevel=stacklevel + 1)

    def batch(self, sentences: Sequence[Sequence[str]]) -> torch.Tensor:
        """A (batch, max_len, width) int64 tensor; padded timesteps are all zero."""
        max_len = max((len(s) for s in sentences), default=0)
        out = np.zeros((len(sentences), max_len, self.width), dtype=np.int64)
        for i, sentence in enumerate(sentences):
            if len(sentence):
                out[i, : len(sentence)] = np.stack([self.token(t) for t in sentence])
        return torch.from_numpy(out)


def batch_to_ids(sentences: Sequence[Sequence[str]], max_characters_per_token: int = 50
                 ) -> torch.Tensor:
    """Character ids of tokenized sentences: (batch, max_len, max_chars), 0 = padding."""
    return CharIds(max_characters_per_token).batch(sentences)
