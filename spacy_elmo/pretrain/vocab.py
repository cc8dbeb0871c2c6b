"""The softmax vocabulary: `<S>`, `</S>`, `<UNK>`, then words by descending frequency."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Dict, List, Optional, Sequence

from ..bilm.chars import BOS_TOKEN, EOS_TOKEN
from ..errors import ElmoError, Errors
from ..files.atomic import write_text
from .config import PretrainConfig
from .corpus import TextSettings, iter_sentences, warn_undecodable

UNK_TOKEN = "<UNK>"
SPECIALS = (BOS_TOKEN, EOS_TOKEN, UNK_TOKEN)


class Vocab:
    """Words to softmax ids; unknown words map to `<UNK>` (id 2)."""

    def __init__(self, words: Sequence[str]) -> None:
        if tuple(words[:3]) != SPECIALS:
            words = list(SPECIALS) + [w for w in words if w not in SPECIALS]
        self.words: List[str] = list(words)
        self.index: Dict[str, int] = {w: i for i, w in enumerate(self.words)}
        self.unk = self.index[UNK_TOKEN]

    def __len__(self) -> int:
        return len(self.words)

    def __getitem__(self, word: str) -> int:
        return self.index.get(word, self.unk)

    @classmethod
    def from_counts(cls, counts: Counter, *, size: int, min_count: int = 1) -> Vocab:
        ranked = sorted((w for w, c in counts.items() if c >= min_count and w not in SPECIALS),
                        key=lambda w: (-counts[w], w))
        return cls(list(SPECIALS) + ranked[: max(size - len(SPECIALS), 0)])

    @classmethod
    def from_file(cls, path: Path) -> Vocab:
        """One word a line (anything after a tab, such as a count, is ignored)."""
        if not path.exists():
            raise ElmoError(Errors.E001.format(path=path, cwd=Path.cwd()))
        try:
            data = path.read_bytes()
        except OSError as err:  # a directory, or not readable
            raise ElmoError(Errors.E022.format(path=path)) from err
        try:
            text = data.decode("utf-8-sig")  # a byte order mark is not a word
        except UnicodeDecodeError as err:
            at = data[: err.start].count(b"\n") + 1
            raise ElmoError(Errors.E010.format(line=at, path=path, err=err.reason)) from err
        seen: Dict[str, int] = {}
        words = []
        for number, line in enumerate(text.splitlines(), 1):
            word = line.split("\t")[0]
            if not line:
                continue
            if word in seen:
                raise ElmoError(Errors.E124.format(path=path, word=word, first=seen[word],
                                                   second=number))
            seen[word] = number
            words.append(word)
        return cls(words)

    def to_file(self, path: Path) -> None:
        write_text(path, "".join(w + "\n" for w in self.words))


def count_words(files: Sequence[Path], settings: TextSettings, *,
                max_tokens: Optional[int] = None) -> Counter:
    """Word counts of the corpus in one streaming pass (at most `max_tokens` tokens)."""
    counts: Counter = Counter()
    skipped = [0]
    n_tokens = 0
    for sentence in iter_sentences(files, settings, counter=skipped):
        counts.update(sentence)
        n_tokens += len(sentence)
        if max_tokens is not None and n_tokens >= max_tokens:
            break
    if n_tokens == 0:
        detail = f" ({skipped[0]} undecodable lines skipped)" if skipped[0] else ""
        raise ElmoError(Errors.E101.format(paths=[str(p) for p in files], detail=detail))
    warn_undecodable(skipped[0], files, "counting the vocabulary")
    return counts


def build_vocab(files: Sequence[Path], settings: TextSettings, *, size: int,
                min_count: int = 1, max_tokens: Optional[int] = None) -> Vocab:
    return Vocab.from_counts(count_words(files, settings, max_tokens=max_tokens), size=size,
                             min_count=min_count)


def choose_vocab(config: PretrainConfig, files: List[Path], settings: TextSettings,
                 exported: Optional[Vocab] = None) -> Vocab:
    """The given vocabulary file, else the --init-weights export's, else one counted on the
    corpus."""
    if config.vocab is not None:
        return Vocab.from_file(Path(config.vocab))
    if exported is not None:
        return exported
    return build_vocab(files, settings, size=config.vocab_size, min_count=config.min_count,
                       max_tokens=config.vocab_max_tokens)


def check_vocab(config: PretrainConfig, vocab: Vocab) -> None:
    """The sampled softmax draws its negatives from the vocabulary: it must be larger."""
    if config.n_negatives >= len(vocab):
        raise ElmoError(Errors.E102.format(n_vocab=len(vocab), n_negatives=config.n_negatives))
