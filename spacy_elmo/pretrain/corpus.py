"""Streaming raw-text corpora: files, globs and directories of plain, .gz or .xz UTF-8 text.

Lines are read in bounded pieces (a 1 MB line never becomes one allocation of unbounded
size), tokenized by a spaCy language's tokenizer or on whitespace, split into sentences and
cut into chunks of at most `max_sentence_tokens`. Positions are byte offsets into the
decompressed stream, so a reader can stop and resume exactly.
"""

from __future__ import annotations

import glob
import gzip
import io
import lzma
import os
import random
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Callable, Dict, Iterator, List, Optional, Sequence, Tuple, cast

from ..errors import ElmoError, Errors, Warnings, warn
from ..files.guard import model_or_run
from .stopping import stop_point

TEXT_SUFFIXES = (".txt", ".gz", ".xz", ".text", ".raw")
SENTENCE_END = {".", "!", "?", "...", "…", "。", "！", "？"}
STRONG_END = {"。", "！", "？"}
OPENERS = "\"'“‘([«"
CLOSERS = {"\"", "'", "”", "’", ")", "]", "»"}
ABBREVIATIONS = {"mr.", "mrs.", "ms.", "dr.", "prof.", "st.", "jr.", "sr.", "vs.", "etc.",
                 "e.g.", "i.e.", "no.", "inc.", "co.", "ltd.", "gen.", "col.", "lt.", "mt.",
                 "fig.", "vol.", "ca.", "approx."}


@dataclass(frozen=True)
class TextSettings:
    """How raw lines become sentences of tokens."""

    lang: str = "whitespace"
    segmenter: Optional[str] = None
    split_sentences: bool = True
    max_sentence_tokens: int = 200
    max_line_bytes: int = 100_000
    skip_pattern: Optional[str] = None


def resolve_files(patterns: Sequence[str], *, exclude: Optional[Path] = None,
                  what: str = "corpus") -> List[Path]:
    """Every file named by the patterns (files, globs, directories), in a stable order: the
    one rule for text inputs (`what`: the setting, for errors). An empty pattern is an
    error (E165: it would name the working directory). No file inside a pretraining run or
    a biLM directory (`files.guard.model_or_run`) is ever text: directories and globs leave them
    out (W026 names them), and one named as such is refused (E166). The files of `exclude`
    (a run's own directory, which may not exist yet) are left out likewise, but one named as
    such is kept (the run directory's checks refuse it)."""
    files: List[Path] = []
    skip = None if exclude is None else Path(exclude).resolve()
    holders: Dict[Tuple[Path, bool], Optional[Tuple[Path, str]]] = {}
    for pattern in patterns:
        if not str(pattern).strip():
            raise ElmoError(Errors.E165.format(what=what, given=str(pattern)))
        path = Path(pattern)
        if path.is_file():
            holder = _holder(path.resolve().parent, holders)
            if holder is not None and not (skip is not None
                                           and path.resolve().is_relative_to(skip)):
                raise ElmoError(Errors.E166.format(path=path, what=holder[1],
                                                   where=holder[0]))
            files.append(path)
            continue
        if path.is_dir():
            found = sorted(_files_under(path))
        else:
            found = sorted(Path(p) for p in glob.glob(str(pattern), recursive=True)
                           if Path(p).is_file())
        kept = [p for p in found if not (skip is not None and p.resolve().is_relative_to(skip))]
        text = [p for p in kept if _holder(p.resolve().parent, holders) is None]
        holding = {h[0] for p in kept if (h := _holder(p.resolve().parent, holders)) is not None}
        left_out = sorted(str(d) for d in holding  # RUN, not also RUN/model
                          if not any(d != o and d.is_relative_to(o) for o in holding))
        if not text and left_out:
            first = next(p for p in kept if _holder(p.resolve().parent, holders) is not None)
            holder = _holder(first.resolve().parent, holders)
            assert holder is not None
            raise ElmoError(Errors.E166.format(path=first, what=holder[1], where=holder[0]))
        if not text:
            raise ElmoError(Errors.E100.format(pattern=str(pattern), cwd=Path.cwd()))
        if left_out:
            warn(Warnings.W026.format(pattern=str(pattern), n=len(left_out),
                                      dirs=", ".join(left_out[:3])
                                      + (", ..." if len(left_out) > 3 else "")), stacklevel=2)
        files.extend(text)
    return files


def _files_under(directory: Path) -> Iterator[Path]:
    """The text files below a directory (by suffix; not hidden ones; links to directories
    not followed)."""
    for root, _, names in os.walk(directory):
        for name in names:
            path = Path(root) / name
            if not name.startswith(".") and name.endswith(TEXT_SUFFIXES) and path.is_file():
                yield path


def _holder(directory: Path, seen: Dict[Tuple[Path, bool], Optional[Tuple[Path, str]]],
            here: bool = True) -> Optional[Tuple[Path, str]]:
    """The directory (resolved) whose model or run a file in `directory` belongs to, with
    what it is: `directory` itself when it is a run or a biLM directory, else a run it lies
    in at any depth (RUN/model, RUN/snapshots/step_N), or None (memoized in `seen`)."""
    key = (directory, here)
    if key not in seen:
        what = model_or_run(directory)
        above = directory.parent
        if what is not None and (here or what == "a pretraining run"):
            seen[key] = (directory, what)
        else:
            seen[key] = None if above == directory else _holder(above, seen, here=False)
    return seen[key]


def pattern_holding(patterns: Sequence[str], directory: Path) -> Optional[str]:
    """The first pattern whose files may lie in `directory` (a directory pattern above it,
    or a glob whose fixed leading part is above it), or None."""
    target = Path(directory).resolve()
    for pattern in patterns:
        if not str(pattern).strip():  # an error when the files are resolved
            continue
        parts = Path(pattern).parts
        fixed = next((i for i, part in enumerate(parts) if glob.has_magic(part)), len(parts))
        if fixed < len(parts) or Path(pattern).is_dir():
            root = Path(*parts[:fixed]) if fixed else Path(".")
            if target.is_relative_to(root.resolve()):
                return pattern
    return None


def open_binary(path: Path) -> IO[bytes]:
    """A plain, .gz or .xz file's bytes."""
    if path.name.endswith(".gz"):
        return cast(IO[bytes], gzip.open(path, "rb"))
    if path.name.endswith(".xz"):
        return cast(IO[bytes], lzma.open(path, "rb"))
    return open(path, "rb")


def open_text(path: Path) -> IO[str]:
    """A plain, .gz or .xz file as UTF-8 text (a byte-order mark skipped)."""
    return io.TextIOWrapper(open_binary(path), encoding="utf-8-sig")


def first_undecodable_line(path: Path) -> int:
    """The number of the first line of a plain, .gz or .xz file that is not UTF-8 (0 if
    every line is)."""
    with open_binary(path) as f:
        for n, raw in enumerate(f, 1):
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError:
                return n
    return 0


def _safe_cut(piece: bytes) -> int:
    """Where to cut a piece of an over-long line: after its last space, else at a UTF-8
    character boundary."""
    space = piece.rfind(b" ")
    if space > 0:
        return space + 1
    cut = len(piece)
    while cut > len(piece) - 4 and cut > 1 and (piece[cut - 1] & 0xC0) == 0x80:
        cut -= 1
    if cut > 1 and piece[cut - 1] >= 0xC0:
        cut -= 1
    return cut


UTF8_BOM = b"\xef\xbb\xbf"


def read_pieces(path: Path, *, offset: int = 0, max_bytes: int = 100_000
                ) -> Iterator[Tuple[bytes, int]]:
    """(piece, offset after it) for every line of a file from `offset`; a line longer than
    `max_bytes` comes in several pieces cut between words. A byte order mark at the start
    of the file is left out (it is not text)."""
    with open_binary(path) as f:
        if offset:
            f.seek(offset)
        elif f.read(len(UTF8_BOM)) == UTF8_BOM:
            offset = len(UTF8_BOM)
        else:
            f.seek(0)
        carry = b""
        position = offset
        while True:
            data = carry + f.readline(max_bytes - len(carry))
            if not data:
                return
            if data.endswith(b"\n") or len(data) < max_bytes:
                carry = b""
                piece = data
            else:
                cut = _safe_cut(data)
                piece, carry = data[:cut], data[cut:]
            position += len(piece)
            yield piece, position


# Chinese segmenters usable without a model download (pkuseg needs one: segment the text
# beforehand and pretrain with lang "whitespace").
SEGMENTERS = ("char", "jieba")

class Tokenizer:
    """Text to token strings: a spaCy language's tokenizer (for Chinese, with the
    `segmenter` given: "char" or "jieba"), or whitespace."""

    def __init__(self, lang: str, segmenter: Optional[str] = None) -> None:
        self.lang = lang
        self._spacy: Optional[Callable] = None
        if segmenter is not None and lang != "zh":
            raise ElmoError(Errors.E117.format(segmenter=segmenter, lang=lang, err=(
                "only spaCy's Chinese tokenizer ('zh') takes a segmenter")))
        if segmenter is not None and segmenter not in SEGMENTERS:
            raise ElmoError(Errors.E117.format(segmenter=segmenter, lang=lang,
                                               err=f"use one of {SEGMENTERS}"))
        if lang == "whitespace":
            return
        import spacy

        config = {"nlp": {"tokenizer": {"segmenter": segmenter}}} if segmenter else {}
        try:
            self._spacy = spacy.blank(lang, config=config).tokenizer
        except (ImportError, KeyError, ValueError) as err:
            error = Errors.E117 if segmenter else Errors.E114
            raise ElmoError(error.format(lang=lang, segmenter=segmenter, err=err)) from err

    def __call__(self, text: str) -> List[str]:
        if self._spacy is None:
            return text.split()
        return [t.text for t in self._spacy(text) if not t.is_space]


def _opens_sentence(token: str) -> bool:
    return token[:1].isupper() or token[:1].isdigit() or token[:1] in OPENERS


def _is_end(token: str, glued: bool) -> bool:
    if token in SENTENCE_END:
        return True
    token = token.rstrip("".join(CLOSERS)) if glued else token
    if not glued or len(token) < 2 or token.lower() in ABBREVIATIONS:
        return False
    return token[-1] in "!?" or (token[-1] == "." and token[-2].isalpha()
                                 and not token[:-1].isupper())


def split_sentences(tokens: List[str], *, glued: bool = False) -> List[List[str]]:
    """Rule-based: a sentence ends after `.`, `!`, `?` (and a closing quote or bracket
    after them) when the next token opens a sentence, and always after CJK stops. With
    `glued` (whitespace-tokenized text) a word ending in the mark counts too, except
    common abbreviations and initials."""
    sentences: List[List[str]] = []
    start = 0
    i = 0
    while i < len(tokens) - 1:
        end = i
        if tokens[i] in STRONG_END:
            split = True
        elif _is_end(tokens[i], glued):
            if tokens[i + 1] in CLOSERS:
                end = i + 1
            split = end + 1 < len(tokens) and _opens_sentence(tokens[end + 1])
        else:
            split = False
        if split:
            sentences.append(tokens[start : end + 1])
            start = end + 1
        i = end + 1
    if start < len(tokens):
        sentences.append(tokens[start:])
    return sentences


class LineToSentences:
    """Decoded text of one line to bounded sentences, per the settings."""

    def __init__(self, settings: TextSettings) -> None:
        self.settings = settings
        self.tokenizer = Tokenizer(settings.lang, settings.segmenter)
        self.skip = re.compile(settings.skip_pattern) if settings.skip_pattern else None

    def __call__(self, text: str) -> List[List[str]]:
        text = text.strip()
        if not text or (self.skip is not None and self.skip.search(text)):
            return []
        tokens = self.tokenizer(text)
        if not tokens:
            return []
        groups = (split_sentences(tokens, glued=self.tokenizer.lang == "whitespace")
                  if self.settings.split_sentences else [tokens])
        limit = self.settings.max_sentence_tokens
        return [group[i : i + limit] for group in groups for i in range(0, len(group), limit)]


@dataclass
class SourceState:
    """Where a sentence source stands: resumable exactly."""

    epoch: int = 0
    file_index: int = 0
    offset: int = 0
    line: int = 0
    pending: List[List[str]] = field(default_factory=list)
    undecodable: int = 0
    buffer: List[List[str]] = field(default_factory=list)
    draws: int = 0


class SentenceSource:
    """An endless stream of sentences over the files (file order reshuffled each epoch),
    keeping the lines `line % world_size == rank` of every file. With `buffer_size` > 0,
    each sentence is drawn at random from a buffer of the next `buffer_size` ones, so that a
    batch mixes documents instead of holding consecutive sentences of one (the buffer is
    part of the resumable state)."""

    def __init__(self, files: Sequence[Path], settings: TextSettings, *, seed: int = 0,
                 rank: int = 0, world_size: int = 1, shuffle: bool = True,
                 buffer_size: int = 0, state: Optional[SourceState] = None) -> None:
        self.files = list(files)
        self.buffer_size = buffer_size
        self.to_sentences = LineToSentences(settings)
        self.settings = settings
        self.seed = seed
        self.rank = rank
        self.world_size = world_size
        self.shuffle = shuffle
        self.state = state if state is not None else SourceState()
        self._pieces: Optional[Iterator[Tuple[bytes, int]]] = None
        self._whole_pass = self.state.file_index == 0 and self.state.offset == 0
        self._found = 0
        self._warned = False

    def order(self, epoch: int) -> List[Path]:
        files = list(self.files)
        if self.shuffle:
            random.Random(self.seed * 1_000_003 + epoch).shuffle(files)
        return files

    def next_sentence(self) -> List[str]:
        if not self.buffer_size:
            return self._read_sentence()
        s = self.state
        while len(s.buffer) < self.buffer_size:
            stop_point()  # a large buffer takes long to fill
            s.buffer.append(self._read_sentence())
        # a fresh generator per draw, seeded by (seed, rank, draw): resumable from one integer
        index = random.Random(f"{self.seed}-{self.rank}-{s.draws}").randrange(len(s.buffer))
        s.draws += 1
        s.buffer[index], s.buffer[-1] = s.buffer[-1], s.buffer[index]
        return s.buffer.pop()

    def _read_sentence(self) -> List[str]:
        s = self.state
        while not s.pending:
            stop_point()  # between lines, where the state can be saved
            if self._pieces is None:
                path = self.order(s.epoch)[s.file_index]
                self._pieces = read_pieces(path, offset=s.offset,
                                           max_bytes=self.settings.max_line_bytes)
            got = next(self._pieces, None)
            if got is None:
                self._next_file()
                continue
            piece, s.offset = got
            s.line += 1
            if (s.line - 1) % self.world_size != self.rank:
                continue
            text = decode(piece)
            if text is None:
                s.undecodable += 1
                continue
            s.pending = self.to_sentences(text)
            self._found += len(s.pending)
        return s.pending.pop(0)

    def _next_file(self) -> None:
        s = self.state
        self._pieces = None
        s.file_index, s.offset, s.line = s.file_index + 1, 0, 0
        if s.file_index < len(self.files):
            return
        if self._whole_pass and self._found == 0:
            raise ElmoError(Errors.E101.format(
                paths=[str(p) for p in self.files],
                detail=f" ({s.undecodable} undecodable lines skipped)"))
        if s.undecodable and not self._warned:
            self._warned = True
            warn_undecodable(s.undecodable, self.files, "training, so far")
        s.epoch, s.file_index = s.epoch + 1, 0
        self._whole_pass, self._found = True, 0


def decode(piece: bytes) -> Optional[str]:
    """UTF-8 text of a piece, or None for binary garbage."""
    try:
        text = piece.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return None if "\x00" in text else text


def warn_undecodable(n: int, files: Sequence[Path], during: str) -> None:
    """Say how many lines of a corpus were skipped as not UTF-8 (nothing when none)."""
    if n:
        warn(Warnings.W005.format(n=n, paths=[str(p) for p in files], during=during),
             stacklevel=3)


def iter_sentences(files: Sequence[Path], settings: TextSettings,
                   counter: Optional[List[int]] = None) -> Iterator[List[str]]:
    """Every sentence of the files once, in order; counter[0] counts undecodable lines."""
    to_sentences = LineToSentences(settings)
    for path in files:
        for piece, _ in read_pieces(path, max_bytes=settings.max_line_bytes):
            text = decode(piece)
            if text is None:
                if counter is not None:
                    counter[0] += 1
                continue
            yield from to_sentences(text)
