"""Convert labelled datasets to spaCy's `.spacy` format (used by project.yml).

  python -m spacy_elmo_lab.convert ner INPUT OUTPUT [--sentences-per-doc 10]
      CoNLL-style NER: first column the word, last column a tag of BIO/IOB, BIOES/BILOU or
      BMES (prefixes in upper or lower case); blank lines end sentences; -DOCSTART- lines are
      skipped (CoNLL-2003, WNUT-17, and Chinese character NER (MSRA, Resume; Weibo with
      --strip-position-digit)).
  python -m spacy_elmo_lab.convert textcat INPUT OUTPUT --format sst|trec|tsv [--multilabel]
      sst: "LABEL text" per line (stsa.fine.*, stsa.binary.*); trec: "COARSE:fine text";
      tsv: "text<TAB>label" or "label<TAB>text" (--label-first).

Inputs are UTF-8 (a byte order mark is allowed). A file that cannot be read stops the
conversion with a message naming the file and line, before any output is written; outputs
are written atomically, so a failed run leaves the old ones as they were.
"""

from __future__ import annotations

import random
import re
from pathlib import Path
from typing import Iterator, List, Optional, Tuple, TypeVar, Union

import spacy
import typer
from spacy.language import Language
from spacy.tokens import Doc, DocBin
from spacy.training import biluo_tags_to_spans, iob_to_biluo

from spacy_elmo.files.atomic import atomic_write
from spacy_elmo.files.guard import guard_output

from .messages import one_line_errors, user_errors

app = typer.Typer(add_completion=False, no_args_is_help=True)
NO_SPACE_LANGS = ("zh", "ja", "th")
FORMATS = ("sst", "trec", "tsv")
# tag prefix (upper case) -> BILUO prefix: BIO/IOB, BIOES/BILOU, BMES (M = inside)
PREFIXES = {"B": "B", "I": "I", "M": "I", "E": "L", "L": "L", "S": "U", "U": "U"}
SCHEMES = ("O, or PREFIX-LABEL with the prefixes of BIO/IOB (B-, I-), BIOES/BILOU (B-, I-, "
           "E-/L-, S-/U-) or BMES (B-, M-, E-, S-), in upper or lower case (e.g. B-PER)")
T = TypeVar("T")


def _spaces(n: int) -> List[bool]:
    """A space after every word but the last: pre-tokenized text without a trailing space."""
    return [True] * (n - 1) + [False] if n else []


def _read_lines(path: Path, what: str) -> List[str]:
    """The lines of a UTF-8 file (a byte order mark is dropped); a missing, unreadable or
    non-UTF-8 file is a clear error naming it (and the line of the first bad byte)."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise typer.BadParameter(f"no such {what}: {path}") from None
    except OSError as err:
        raise typer.BadParameter(f"cannot read the {what} {path}: {err.strerror}") from None
    try:
        return raw.decode("utf-8-sig").splitlines()
    except UnicodeDecodeError as err:
        line = err.object[:err.start].count(b"\n") + 1
        raise typer.BadParameter(
            f"{path}:{line}: not UTF-8 ({err.reason} at byte {err.start}); convert the "
            f"{what} to UTF-8 first (e.g. iconv -f GBK -t UTF-8)") from None


def _normalise_tag(tag: str) -> Optional[str]:
    """The tag with its prefix in upper case ("O" for outside); None if it is not a tag of
    the schemes in SCHEMES."""
    if tag in ("O", "o"):
        return "O"
    prefix, dash, label = tag.partition("-")
    if not dash or not label or prefix.upper() not in PREFIXES:
        return None
    return f"{prefix.upper()}-{label}"


def _read_columns(path: Path, strip_digit: bool) -> Iterator[Tuple[List[str], List[str]]]:
    words: List[str] = []
    tags: List[str] = []
    for n, line in enumerate(_read_lines(path, "input file"), 1):
        parts = line.split()
        if not parts or parts[0] == "-DOCSTART-":
            if words:
                yield words, tags
            words, tags = [], []
            continue
        if len(parts) < 2:
            raise typer.BadParameter(
                f"{path}:{n}: the token {parts[0]!r} has no tag column; NER lines are "
                "'WORD ... TAG' (the tag last, O outside entities), sentences end at a "
                "blank line")
        tag = _normalise_tag(parts[-1])
        if tag is None:
            raise typer.BadParameter(
                f"{path}:{n}: the tag {parts[-1]!r} is not understood; tags are {SCHEMES}")
        word = parts[0][:-1] if strip_digit and len(parts[0]) > 1 else parts[0]
        words.append(word)
        tags.append(tag)
    if words:
        yield words, tags


def _to_biluo(tags: List[str]) -> List[str]:
    """BIO/IOB, BIOES/BILOU or BMES (M = inside) tags to BILUO; ValueError on other tags."""
    mapped = []
    for tag in tags:
        norm = _normalise_tag(tag)
        if norm is None:
            raise ValueError(f"the tag {tag!r} is not understood; tags are {SCHEMES}")
        if norm == "O":
            mapped.append("O")
            continue
        prefix, label = norm.split("-", 1)
        mapped.append(f"{PREFIXES[prefix]}-{label}")
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


def _blank(lang: str, segmenter: Optional[str] = None) -> Language:
    try:
        if segmenter:
            return spacy.blank(lang, config={"nlp": {"tokenizer": {"segmenter": segmenter}}})
        return spacy.blank(lang)
    except (ImportError, ValueError) as err:  # an unknown language, a missing segmenter
        what = f"--lang {lang!r}" + (f" with --segmenter {segmenter!r}" if segmenter else "")
        lines = [line.strip() for line in str(err).splitlines() if line.strip()]
        detail = " ".join(lines[:2]) or type(err).__name__
        raise typer.BadParameter(f"{what}: {detail}") from None


def _check_args(input_path: Path, output_path: Path, split: Optional[float],
                split_output: Optional[Path], limit: int, *, overwrite: bool = False,
                inputs: Tuple[Path, ...] = ()) -> None:
    """The checks common to both commands, made before anything is read or written: the
    outputs are neither an input (E025) nor, without `overwrite`, existing files (E026)."""
    if limit < 0:
        raise typer.BadParameter(f"--limit must be 0 (all) or a positive count, not {limit}")
    if split is not None and split_output is None:
        raise typer.BadParameter("--split needs --split-output (the file for that fraction)")
    if split_output is not None and split is None:
        raise typer.BadParameter("--split-output needs --split (the fraction to move there, "
                                 "e.g. --split 0.1)")
    if split is not None and not 0 < split < 1:
        raise typer.BadParameter(f"--split must be a fraction between 0 and 1 (e.g. 0.1), "
                                 f"not {split}")
    if split_output is not None and split_output.resolve() == output_path.resolve():
        raise typer.BadParameter("--split-output must differ from OUTPUT_PATH")
    outputs = [(output_path, "OUTPUT_PATH")]
    outputs += [(split_output, "--split-output")] if split_output is not None else []
    with user_errors():
        for out, what in outputs:
            guard_output(out, inputs=[input_path, *inputs], overwrite=overwrite, what=what)


def _write(path: Path, db: DocBin) -> None:
    with atomic_write(path, suffix=".spacy") as tmp:
        db.to_disk(tmp)


def ner(input_path: Path, output_path: Path, sentences_per_doc: int = 10,
        lang: str = "en", strip_position_digit: bool = False, limit: int = 0,
        cats_from_entities: bool = False, split: Optional[float] = None,
        split_output: Optional[Path] = None, seed: int = 0, overwrite: bool = False) -> None:
    """CoNLL-style NER to .spacy (docs of N sentences, sentence starts set).

    --cats-from-entities also sets `doc.cats`: ENTITY if the doc mentions any entity, else
    NO_ENTITY (a text classification task made from the same openly licensed data).
    --split F --split-output PATH moves a random fraction F of the sentences to a second
    file (a dev set for corpora that have none, e.g. MSRA). --overwrite replaces existing
    outputs.
    """
    if sentences_per_doc < 1:
        raise typer.BadParameter(f"--sentences-per-doc must be 1 or more, not "
                                 f"{sentences_per_doc}")
    _check_args(input_path, output_path, split, split_output, limit, overwrite=overwrite)
    nlp = _blank(lang)
    sentences = list(_read_columns(input_path, strip_position_digit))
    if not sentences:
        raise typer.BadParameter(
            f"{input_path} holds no sentences (empty, or only -DOCSTART- and blank lines); "
            "NER files have one 'WORD ... TAG' line per token")
    if limit:
        sentences = sentences[:limit]
    written = []
    for path, part in _split(sentences, output_path, split, split_output, seed, "sentences"):
        db = DocBin()
        for start in range(0, len(part), sentences_per_doc):
            group = part[start : start + sentences_per_doc]
            words = [w for ws, _ in group for w in ws]
            sent_starts: List[Union[bool, int, None]] = [
                i == 0 for ws, _ in group for i in range(len(ws))]
            spaces = [False] * len(words) if lang in NO_SPACE_LANGS else _spaces(len(words))
            doc = Doc(nlp.vocab, words=words, spaces=spaces, sent_starts=sent_starts)
            doc.ents = biluo_tags_to_spans(doc, [t for _, ts in group for t in _to_biluo(ts)])
            if cats_from_entities:
                doc.cats = {"ENTITY": float(bool(doc.ents)), "NO_ENTITY": float(not doc.ents)}
            db.add(doc)
        written.append((path, part, db))
    for path, part, db in written:
        _write(path, db)
        typer.echo(f"{input_path} -> {path}: {len(part)} sentences, {len(db)} docs")


def conllu(input_path: Path, output_path: Path, sentences_per_doc: int = 1,
           overwrite: bool = False) -> None:
    """Universal Dependencies CoNLL-U to .spacy with spaCy's own converter (`spacy convert
    --converter conllu`): tags, morphology, lemmas, heads and labels; docs of N sentences
    (1: each sentence alone, the gold-segmentation setting UD scores are reported in).
    --overwrite replaces an existing OUTPUT_PATH."""
    from spacy.training.converters import conllu_to_docs

    if sentences_per_doc < 1:
        raise typer.BadParameter(f"--sentences-per-doc must be 1 or more, not "
                                 f"{sentences_per_doc}")
    _check_args(input_path, output_path, None, None, 0, overwrite=overwrite)
    lines = _read_lines(input_path, "CoNLL-U file")
    shape = ("CoNLL-U files have one 'ID FORM LEMMA UPOS XPOS FEATS HEAD DEPREL DEPS MISC' "
             "line per word (10 tab-separated columns), sentences separated by blank lines")
    for number, line in enumerate(lines, start=1):
        if line.strip() and not line.startswith("#") and len(line.split("\t")) != 10:
            raise typer.BadParameter(f"{input_path}:{number}: not a CoNLL-U line ({shape})")
    try:
        db = DocBin(docs=conllu_to_docs("\n".join(lines), n_sents=sentences_per_doc,
                                        merge_subtokens=False, no_print=True))
    except (ValueError, KeyError, IndexError) as err:
        raise typer.BadParameter(f"{input_path}: spaCy's CoNLL-U reader failed ({err}); "
                                 f"{shape}") from None
    if not len(db):
        raise typer.BadParameter(f"{input_path} holds no sentences: {shape}")
    _write(output_path, db)
    typer.echo(f"{input_path} -> {output_path}: {len(db)} docs")


def _split(rows: List[T], output: Path, split: Optional[float], split_output: Optional[Path],
           seed: int, what: str = "rows") -> List[Tuple[Path, List[T]]]:
    """(path, rows) pairs: all rows to `output`, or a seeded random fraction to
    `split_output` and the rest to `output` (both non-empty; `_check_args` checked the
    arguments)."""
    if split is None or split_output is None:
        return [(output, rows)]
    rows = list(rows)
    random.Random(seed).shuffle(rows)
    n_split = int(len(rows) * split)
    if n_split == 0 or n_split == len(rows):
        raise typer.BadParameter(
            f"--split {split} of {len(rows)} {what} leaves {n_split} for {split_output} and "
            f"{len(rows) - n_split} for {output}; both need at least one: use a larger "
            f"fraction (at least {1 / len(rows):.3g})")
    return [(output, rows[n_split:]), (split_output, rows[:n_split])]


def _bad_row(path: Path, n: int, problem: str) -> typer.BadParameter:
    return typer.BadParameter(f"{path}:{n}: {problem}")


def _read_textcat(path: Path, fmt: str, label_first: bool
                  ) -> Iterator[Tuple[int, str, List[str]]]:
    """(line number, text, labels) for each non-blank line."""
    for n, line in enumerate(_read_lines(path, "input file"), 1):
        if not line.strip():
            continue
        if fmt in ("sst", "trec"):
            parts = line.split(None, 1)
            if len(parts) < 2:
                raise _bad_row(path, n, f"only a label ({parts[0]!r}) and no text; {fmt} "
                                        "lines are 'LABEL text'")
            label, text = parts[0], parts[1].strip()
            if fmt == "sst":
                if not re.fullmatch(r"[0-9]+", label):
                    raise _bad_row(path, n, f"the label {label!r} is not a number; sst "
                                            "lines are 'LABEL text' (e.g. '3 a good movie')")
                yield n, text, [label]
            else:
                coarse, colon, _ = label.partition(":")
                if not colon or not coarse:
                    raise _bad_row(path, n, f"the label {label!r} is not COARSE:fine; trec "
                                            "lines are 'COARSE:fine text' (e.g. 'HUM:ind "
                                            "Who was Caesar ?')")
                yield n, text, [coarse]
        else:
            if line.count("\t") != 1:
                found = "no tab" if "\t" not in line else f"{line.count(chr(9)) + 1} columns"
                raise _bad_row(path, n, f"{found}; tsv lines are "
                               + ("'label<TAB>text'" if label_first else "'text<TAB>label'"))
            if label_first:
                label, text = line.split("\t", 1)
            else:
                text, label = line.rsplit("\t", 1)
            labels = [part.strip() for part in label.split(",")]
            if not text.strip():
                raise _bad_row(path, n, "no text before the tab" if not label_first
                               else "no text after the tab")
            if not all(labels):
                raise _bad_row(path, n, f"an empty label in {label!r}")
            yield n, text.strip(), labels


def _read_label_names(path: Path) -> List[str]:
    """One class name per line (blank lines ignored), index 0 first."""
    names = [line.strip() for line in _read_lines(path, "--label-names file")
             if line.strip()]
    if not names:
        raise typer.BadParameter(f"the --label-names file {path} holds no names (one a line)")
    if len(set(names)) != len(names):
        twice = sorted({name for name in names if names.count(name) > 1})
        raise typer.BadParameter(f"the --label-names file {path} names {twice} twice")
    return names


def _label_name(label: str, names: List[str], input_path: Path, n: int,
                label_names: Optional[Path]) -> str:
    if not re.fullmatch(r"[0-9]+", label) or int(label) >= len(names):
        raise _bad_row(input_path, n, f"the label {label!r} is not an index of the "
                                      f"{len(names)} names in {label_names} (0 to "
                                      f"{len(names) - 1})")
    return names[int(label)]


def textcat(input_path: Path, output_path: Path, format: str = "sst", lang: str = "en",
            label_first: bool = False, multilabel: bool = False, limit: int = 0,
            split: Optional[float] = None, split_output: Optional[Path] = None,
            seed: int = 0, label_names: Optional[Path] = None,
            segmenter: Optional[str] = None, overwrite: bool = False) -> None:
    """Labelled sentences to .spacy with one-hot `doc.cats` (whitespace tokens for sst/trec).

    --split F --split-output PATH moves a random fraction F of the rows to a second file
    (e.g. a dev set carved out of TREC's training file). --label-names FILE maps label
    indices to the names on the FILE's lines, one a line (THUCNews' class.txt). --segmenter
    jieba segments Chinese into words (spaCy's zh tokenizer; default: characters).
    --overwrite replaces existing outputs.
    """
    if format not in FORMATS:
        raise typer.BadParameter(f"--format must be one of {', '.join(FORMATS)}, not "
                                 f"{format!r}")
    if label_first and format != "tsv":
        raise typer.BadParameter("--label-first is for --format tsv only")
    _check_args(input_path, output_path, split, split_output, limit, overwrite=overwrite,
                inputs=(label_names,) if label_names is not None else ())
    names = _read_label_names(label_names) if label_names is not None else None
    nlp = _blank(lang, segmenter)
    numbered = list(_read_textcat(input_path, format, label_first))
    if not numbered:
        raise typer.BadParameter(f"{input_path} holds no rows (it is empty or blank)")
    if names is not None:
        rows = [(text, [_label_name(label, names, input_path, n, label_names) for label in ls])
                for n, text, ls in numbered]
    else:
        rows = [(text, ls) for _, text, ls in numbered]
    if limit:
        rows = rows[:limit]
    labels = sorted({label for _, ls in rows for label in ls})
    written = []
    for path, part in _split(rows, output_path, split, split_output, seed, "rows"):
        db = DocBin()
        for text, ls in part:
            words = text.split()
            doc = (Doc(nlp.vocab, words=words, spaces=_spaces(len(words)))
                   if format in ("sst", "trec") else nlp.make_doc(text))
            doc.cats = {label: float(label in ls) for label in labels}
            db.add(doc)
        written.append((path, part, db))
    for path, part, db in written:
        _write(path, db)
        typer.echo(f"{input_path} -> {path}: {len(part)} texts, labels {labels}")
    if not multilabel and any(len(ls) != 1 for _, ls in rows):
        typer.echo("warning: some rows have several labels; use a multi-label config")


for _command in (ner, conllu, textcat):  # one line and exit 1 for a bad input, not a box
    app.command()(one_line_errors(_command))

if __name__ == "__main__":
    app()
