"""Token ids for biLMs whose characters come from a dictionary, optionally with a word
embedding beside the char CNN: the ELMoForManyLangs (EFML) variant.

A token of at most `max_characters_per_token - 2` characters (Unicode code points; longer
ones are cut, and the cut form is also the word looked up) becomes the row
`[<eow>, c1, ..., ck, <bow>, <pad>, ...]`: EFML puts the end-of-word mark first and the
begin-of-word mark last, and its models were trained that way. The boundary tokens `<bos>`
and `<eos>` are the single dictionary entries of those names between the two marks. Unknown
characters and words map to `<oov>`; lookups are exact (no lowercasing or normalisation). As
for byte ids, every id is shifted by +1 so that 0 marks a padded timestep; with a word
embedding, the word's id is one extra column after the characters.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Sequence, Tuple

import numpy as np

from ..errors import ElmoError, Errors, Warnings
from .chars import CharIds

BOS = "<bos>"
EOS = "<eos>"
REQUIRED_CHARS = ("<bow>", "<eow>", "<oov>", "<pad>", BOS, EOS)
REQUIRED_WORDS = ("<oov>", "<pad>")


@dataclass(frozen=True)
class TokenDictionary:
    """Character and word entries in id order (entry i has id i); no words: no word
    embedding."""

    chars: Tuple[str, ...]
    words: Tuple[str, ...] = ()

    def __post_init__(self) -> None:
        check_entries("character", self.chars, "the dictionary")
        if self.words:
            check_entries("word", self.words, "the dictionary")

    def to_dict(self) -> Dict[str, List[str]]:
        return {"chars": list(self.chars), "words": list(self.words)}

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> TokenDictionary:
        return cls(tuple(data["chars"]), tuple(data["words"]))


def check_entries(kind: str, entries: Sequence[str], source: str) -> None:
    """Raise unless a "character" or "word" dictionary has its required entries once each."""
    missing = sorted(set(REQUIRED_CHARS if kind == "character" else REQUIRED_WORDS)
                     - set(entries))
    if missing:
        raise ElmoError(Errors.E035.format(kind=kind, missing=missing, source=source))
    if len(set(entries)) != len(entries):
        raise ElmoError(Errors.E044.format(kind=kind, source=source, n=len(entries),
                                           distinct=len(set(entries))))


class DictionaryIds(CharIds):
    """Maps tokens to shifted id rows through a `TokenDictionary`; remembers recent tokens."""

    bos_token = BOS
    eos_token = EOS

    def __init__(self, dictionary: TokenDictionary, max_characters_per_token: int,
                 memo_size: int = 100_000) -> None:
        self.chars = {c: i + 1 for i, c in enumerate(dictionary.chars)}
        self.words = {w: i + 1 for i, w in enumerate(dictionary.words)}
        self.pad_id = self.chars["<pad>"]
        self.extra_columns = 1 if self.words else 0
        super().__init__(max_characters_per_token, memo_size)

    def _row(self, token: str) -> np.ndarray:
        if len(token) > self.token_budget:
            token = token[: self.token_budget]
        chars = self.chars
        row = np.full(self.width, self.pad_id, dtype=np.int64)
        row[0] = chars["<eow>"]
        if token in (BOS, EOS):
            ids = [chars[token]]
        else:
            oov = chars["<oov>"]
            ids = [chars.get(c, oov) for c in token]
        row[1 : 1 + len(ids)] = ids
        row[1 + len(ids)] = chars["<bow>"]
        if self.words:
            row[-1] = self.words.get(token, self.words["<oov>"])
        return row

    def too_long(self, tokens: Iterable[str]) -> List[str]:
        """The tokens longer than the budget of characters (they are cut to it)."""
        return [t for t in tokens if len(t) > self.token_budget]

    def truncation_warning(self, long: List[str]) -> str:
        return Warnings.W004.format(n=len(long), limit=self.token_budget, example=long[0][:60])
