"""Convert labelled datasets to spaCy's `.spacy` format (used by project.yml).

  python scripts/convert.py ner INPUT OUTPUT [--sentences-per-doc 10]
      CoNLL-style NER: first column the word, last column an IOB/IOB2/BIOES/BMES tag;
      blank lines end sentences; -DOCSTART- lines are skipped (CoNLL-2003, WNUT-17, and
      Chinese character NER (MSRA, Resume; Weibo with --strip-position-digit)).
  python scripts/convert.py textcat INPUT OUTPUT --format sst|trec|tsv [--multilabel]
      sst: "LABEL text" per line (stsa.fine.*, stsa.binary.*); trec: "COARSE:fine text";
      tsv: "text<TAB>label" or "label<TAB>text" (--label-first).
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Iterator, List, Optional, Tuple, TypeVar

import spacy
import typer
from spacy.tokens import Doc, DocBin
from spacy.training import biluo_tags_to_spans, iob_to_biluo

app = typer.Typer(add_completion=False, no_args_is_help=True)
NO_SPACE_LANGS = ("zh", "ja", "th")
T = TypeVar("T")


def _spaces(n: int) -> List[bool]:
    """A space after every word but the last: pre-tokenized text without a trailing space."""
    return [True] * (n - 1) + [False] if n else []


def _read_columns(path: Path, strip_digit: bool) -> Iterator[Tuple[List[str], List[str]]]:
    words: List[str] = []
    tags: List[str] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        parts = line.split()
        if not parts or parts[0] == "-DOCSTART-":
            if words:
                yield words, tags
            words, tags = [], []
            continue
        word = parts[0][:-1] if strip_digit and len(parts[0]) > 1 else parts[0]
        words.append(word)
        tags.append(parts[-1] if len(parts) > 1 else "O")
    if words:
        yield words, tags


def _to_biluo(tags: List[str]) -> List[str]:
    """IOB / IOB2 / BIOES / BMES (M = inside) tags to BILUO."""
    mapped = []
    for tag in tags:
        if tag == "O" or "-" not in tag:
            mapped.append("O")
            continue
        prefix, label = tag.split("-", 1)
        mapped.append({"M": "I", "E": "L", "S": "U"}.get(prefix, prefix) + "-" + label)
    if not any(t.startswith(("L-", "U-")) for t in mapped):
        mapped = iob_to_biluo(mapped)
    return _repair(mapped)


def _repair(tags: List[str]) -> List[str]:
    """Make a BILUO sequence valid: a stray inside/last tag starts an entity, an unclosed
    begin/inside tag ends one (source files have a few such slips)."""
    out = list(tags)
    for i, tag in enumerate(out):
        if tag == "O":
            continue
        prefix, label = tag.split("-", 1)
        prev_open = i > 0 and out[i - 1] in (f"B-{label}", f"I-{label}")
        nxt = tags[i + 1] if i + 1 < len(tags) else "O"
        next_cont = nxt in (f"I-{label}", f"L-{label}")
        if prefix in ("I", "L") and not prev_open:
            prefix = "B" if prefix == "I" else "U"
        if prefix == "B" and not next_cont:
            prefix = "U"
        elif prefix == "I" and not next_cont:
            prefix = "L"
        out[i] = f"{prefix}-{label}"
    return out


@app.command()
def ner(input_path: Path, output_path: Path, sentences_per_doc: int = 10,
        lang: str = "en", strip_position_digit: bool = False, limit: int = 0,
        cats_from_entities: bool = False, split: Optional[float] = None,
        split_output: Optional[Path] = None, seed: int = 0) -> None:
    """CoNLL-style NER to .spacy (docs of N sentences, sentence starts set).

    --cats-from-entities also sets `doc.cats`: ENTITY if the doc mentions any entity, else
    NO_ENTITY (a text classification task made from the same openly licensed data).
    --split F --split-output PATH moves a random fraction F of the sentences to a second
    file (a dev set for corpora that have none, e.g. MSRA).
    """
    nlp = spacy.blank(lang)
    sentences = list(_read_columns(input_path, strip_position_digit))
    if limit:
        sentences = sentences[:limit]
    for path, part in _split(sentences, output_path, split, split_output, seed):
        db = DocBin()
        for start in range(0, len(part), sentences_per_doc):
            group = part[start : start + sentences_per_doc]
            words = [w for ws, _ in group for w in ws]
            sent_starts = [i == 0 for ws, _ in group for i in range(len(ws))]
            spaces = [False] * len(words) if lang in NO_SPACE_LANGS else _spaces(len(words))
            doc = Doc(nlp.vocab, words=words, spaces=spaces, sent_starts=sent_starts)
            doc.ents = biluo_tags_to_spans(doc, [t for _, ts in group for t in _to_biluo(ts)])
            if cats_from_entities:
                doc.cats = {"ENTITY": float(bool(doc.ents)), "NO_ENTITY": float(not doc.ents)}
            db.add(doc)
        path.parent.mkdir(parents=True, exist_ok=True)
        db.to_disk(path)
        typer.echo(f"{input_path} -> {path}: {len(part)} sentences, {len(db)} docs")


def _split(rows: List[T], output: Path, split: Optional[float], split_output: Optional[Path],
           seed: int) -> List[Tuple[Path, List[T]]]:
    """(path, rows) pairs: all rows to `output`, or a seeded random fraction to
    `split_output` and the rest to `output`."""
    if not split:
        return [(output, rows)]
    if split_output is None:
        raise typer.BadParameter("--split needs --split-output")
    rows = list(rows)
    random.Random(seed).shuffle(rows)
    n_split = int(len(rows) * split)
    return [(output, rows[n_split:]), (split_output, rows[:n_split])]


def _read_textcat(path: Path, fmt: str, label_first: bool
                  ) -> Iterator[Tuple[str, List[str]]]:
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        line = line.strip()
        if not line:
            continue
        if fmt == "sst":
            label, text = line.split(" ", 1)
            yield text, [label]
        elif fmt == "trec":
            label, text = line.split(" ", 1)
            yield text, [label.split(":")[0]]
        else:
            a, b = line.split("\t", 1)
            label, text = (a, b) if label_first else (b, a)
            yield text, label.split(",")


@app.command()
def textcat(input_path: Path, output_path: Path, format: str = "sst", lang: str = "en",
            label_first: bool = False, multilabel: bool = False, limit: int = 0,
            split: Optional[float] = None, split_output: Optional[Path] = None,
            seed: int = 0, label_names: Optional[Path] = None,
            segmenter: Optional[str] = None) -> None:
    """Labelled sentences to .spacy with one-hot `doc.cats` (whitespace tokens for sst/trec).

    --split F --split-output PATH moves a random fraction F of the rows to a second file
    (e.g. a dev set carved out of TREC's training file). --label-names FILE maps label
    indices to the names on the FILE's lines (THUCNews' class.txt). --segmenter jieba
    segments Chinese into words (spaCy's zh tokenizer; default: characters).
    """
    nlp = (spacy.blank(lang, config={"nlp": {"tokenizer": {"segmenter": segmenter}}})
           if segmenter else spacy.blank(lang))
    rows = list(_read_textcat(input_path, format, label_first))
    if label_names is not None:
        names = label_names.read_text(encoding="utf-8").split()
        rows = [(text, [names[int(label)] for label in ls]) for text, ls in rows]
    if limit:
        rows = rows[:limit]
    labels = sorted({label for _, ls in rows for label in ls})
    for path, part in _split(rows, output_path, split, split_output, seed):
        db = DocBin()
        for text, ls in part:
            words = text.split()
            doc = (Doc(nlp.vocab, words=words, spaces=_spaces(len(words)))
                   if format in ("sst", "trec") else nlp.make_doc(text))
            doc.cats = {label: float(label in ls) for label in labels}
            db.add(doc)
        path.parent.mkdir(parents=True, exist_ok=True)
        db.to_disk(path)
        typer.echo(f"{input_path} -> {path}: {len(part)} texts, labels {labels}")
    if not multilabel and any(len(ls) != 1 for _, ls in rows):
        typer.echo("warning: some rows have several labels; use a multi-label config")


if __name__ == "__main__":
    app()
