"""Static word vectors (gensim word2vec) on the biLM's pretraining text, tokenized alike.

  python -m spacy_elmo_lab.word2vec OUTPUT_DIR [TRAIN...] [--pretrain-config CONFIG]
      [--pretrain-steps N] [--lang en] [--segmenter char] [--max-tokens N] [--dim 300]
      [--window 5] [--min-count 5] [--epochs 5] [--threads 2] [--seed 0]
  python -m spacy init vectors LANG OUTPUT_DIR/vectors.txt OUTPUT_DIR/nlp

The text is read by the package's own pretraining reader (`spacy_elmo.pretrain.corpus`), with
the settings of a pretraining config (`--pretrain-config`; flags override it) or of the flags
alone (the defaults of `spacy-elmo pretrain`): the same tokenizer (`--lang`, `--segmenter`),
sentence splitting, skip pattern, sentence cut and file order, so the vectors see the tokens
the biLM sees.

- Default: one pass over the files, in the order the pretraining run's first epoch reads them.
- `--pretrain-steps N`: exactly the text a single-process `spacy-elmo pretrain` run with these
  settings reads in its first N steps (its sentence source and batch rows are replayed without
  a model; a sentence that a row had only begun is cut where the row stopped). Repeats if the
  run went past one epoch, and follows its shuffle buffer.
- `--max-tokens N`: only the first N tokens of that stream (the sentence that crosses N is cut).

gensim's Word2Vec (skip-gram) then reads the tokenized sentences from a temporary file in
OUTPUT_DIR, once to count and once per epoch. OUTPUT_DIR gets `vectors.txt` (word2vec text
format, most frequent words first, for `spacy init vectors`) and `corpus.json` (what was read:
files, settings, sentences, tokens, vocabulary, parameters, time). Needs gensim:
`pip install -e ".[vectors]"` in a checkout. With `--threads 1` the vectors depend only on the seed.
"""

from __future__ import annotations

import json
import logging
import time
from collections import deque
from importlib.metadata import version
from pathlib import Path
from typing import Any, Deque, Dict, Iterable, Iterator, List, Optional

import typer
from wasabi import msg

from spacy_elmo.errors import ElmoError, Errors
from spacy_elmo.files.atomic import atomic_write, write_text
from spacy_elmo.files.guard import STDOUT, guard_output
from spacy_elmo.pretrain.batches import RowBuffers, TrainStreams
from spacy_elmo.pretrain.config import PretrainConfig
from spacy_elmo.pretrain.corpus import SentenceSource, iter_sentences, resolve_files
from spacy_elmo.validation import check_all, integer

INSTALL_HINT = 'pip install -e ".[vectors]" (in a checkout of spacy-elmo)'


def file_order(config: PretrainConfig) -> List[Path]:
    """The training files in the order the run's first epoch reads them."""
    return SentenceSource(resolve_files(config.train), config.text_settings(),
                          seed=config.seed).order(0)


def one_pass(config: PretrainConfig) -> Iterator[List[str]]:
    """Every sentence of the training files once, in the file order of the run's first
    epoch."""
    return iter_sentences(file_order(config), config.text_settings())


class _RowLog(list):
    """A batch row's forward chunks that also keeps, in order, the words of every sentence
    the row pulls (TrainStreams appends one framed `<S> w1 .. wn </S>` per sentence)."""

    def __init__(self) -> None:
        super().__init__()
        self.pulled: Deque[List[str]] = deque()
        self.done = 0  # framed tokens of the sentences already given out

    def append(self, chunk: List[str]) -> None:
        super().append(chunk)
        self.pulled.append(chunk[1:-1])


class _NoTensors:
    """Stands in for the BatchMaker: the replay needs the token windows, not tensors."""

    def make(self, inputs: Any, targets: Any, steps: int) -> None:
        return None


def run_text(config: PretrainConfig, steps: int) -> Iterator[List[str]]:
    """The sentences a single-process pretraining run with these settings reads in its
    first `steps` steps: every row sees its first steps * window + 1 framed positions (the
    window's inputs, and the last target). Sentences come out as rows finish them; at the
    end, each row's unfinished sentence is cut where the row stopped."""
    source = SentenceSource(resolve_files(config.train), config.text_settings(),
                            seed=config.seed, buffer_size=config.shuffle_buffer)
    logs = [_RowLog() for _ in range(config.batch_size)]
    streams = TrainStreams(source, _NoTensors(), rows=config.batch_size,  # type: ignore[arg-type]
                           window=config.window,
                           buffers=[RowBuffers(fwd=log, bwd=[]) for log in logs])
    for step in range(1, steps + 1):
        streams.next_batch()
        seen = step * config.window + 1
        for log in logs:
            while log.pulled and log.done + len(log.pulled[0]) + 2 <= seen:
                words = log.pulled.popleft()
                log.done += len(words) + 2
                yield words
    seen = steps * config.window + 1
    for log in logs:
        if log.pulled:
            words = log.pulled[0][: seen - log.done - 1]
            if words:
                yield words


def first_tokens(sentences: Iterable[List[str]], max_tokens: int) -> Iterator[List[str]]:
    """The stream up to exactly `max_tokens` tokens (0: all of it)."""
    left = max_tokens
    for sentence in sentences:
        if max_tokens:
            if left <= 0:
                return
            sentence = sentence[:left]
            left -= len(sentence)
        yield sentence


class TokenFile:
    """Tokenized sentences kept in a file (one per line, tokens separated by single spaces),
    read back as often as gensim asks: the corpus streams, whatever its size."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.sentences = 0
        self.tokens = 0

    def write(self, sentences: Iterable[List[str]]) -> TokenFile:
        with open(self.path, "w", encoding="utf-8", newline="\n") as f:
            for sentence in sentences:
                if not sentence:
                    continue
                line = " ".join(sentence)
                if line.count(" ") != len(sentence) - 1 or "\n" in line:
                    raise ValueError(f"A token holds whitespace, which the tokenizers here "
                                     f"never produce: {sentence!r}")
                f.write(line + "\n")
                self.sentences += 1
                self.tokens += len(sentence)
        return self

    def __iter__(self) -> Iterator[List[str]]:
        with open(self.path, encoding="utf-8", newline="\n") as f:
            for line in f:
                yield line[:-1].split(" ")


class Word2VecError(ValueError):
    """A problem with the word2vec step the user can fix; the message says how."""


def _import_word2vec() -> Any:
    try:
        from gensim.models import Word2Vec
    except ImportError as err:
        raise Word2VecError(f"Training word2vec vectors needs gensim ({err}). Install it with: "
                            f"{INSTALL_HINT}") from err
    return Word2Vec


def check_sizes(positive: Dict[str, int], non_negative: Dict[str, int]) -> None:
    """Word2VecError for a size gensim would choke on (a window of 0 hangs its workers, 0
    threads writes untrained vectors): `positive` must be >= 1, `non_negative` >= 0."""
    rules = {**{flag: integer(1) for flag in positive},
             **{flag: integer(0) for flag in non_negative}}
    try:
        check_all({**positive, **non_negative}, rules, Errors.E020)
    except ElmoError as err:
        raise Word2VecError(str(err)) from err


def train_vectors(corpus: TokenFile, out: Path, *, dim: int, window: int, min_count: int,
                  epochs: int, threads: int, seed: int) -> int:
    """Skip-gram word2vec on the corpus; writes `out` (word2vec text format) atomically and
    returns the number of vectors."""
    word2vec = _import_word2vec()
    model = word2vec(vector_size=dim, window=window, min_count=min_count, sg=1,
                     epochs=epochs, workers=threads, seed=seed)
    model.build_vocab(corpus)
    if len(model.wv) == 0:
        raise Word2VecError(f"No word occurs {min_count} times in the {corpus.tokens} tokens "
                            f"read: lower --min-count or give more text.")
    model.train(corpus, total_examples=model.corpus_count, total_words=model.corpus_total_words,
                epochs=model.epochs)
    with atomic_write(out, suffix=".txt") as tmp:
        model.wv.save_word2vec_format(str(tmp), binary=False)
    return len(model.wv)


def make_vectors(output: Path, config: PretrainConfig, *, pretrain_steps: int = 0,
                 max_tokens: int = 0, dim: int = 300, window: int = 5, min_count: int = 5,
                 epochs: int = 5, threads: int = 2, seed: int = 0) -> Dict[str, Any]:
    """Read the text as the biLM does, train word2vec on it, write OUTPUT/vectors.txt and
    OUTPUT/corpus.json; returns what corpus.json holds."""
    start = time.time()
    check_sizes({"--dim": dim, "--window": window, "--min-count": min_count,
                 "--epochs": epochs, "--threads": threads},
                {"--max-tokens": max_tokens, "--pretrain-steps": pretrain_steps})
    _import_word2vec()  # before reading a corpus for nothing
    if not config.train:
        raise Word2VecError("No training text: pass TRAIN files, or a --pretrain-config "
                            "with `train`.")
    files = file_order(config)
    made = not output.exists()
    output.mkdir(parents=True, exist_ok=True)
    corpus = TokenFile(output / "tokens.tmp")
    try:
        sentences = run_text(config, pretrain_steps) if pretrain_steps else one_pass(config)
        corpus.write(first_tokens(sentences, max_tokens))
        if corpus.tokens == 0:
            raise Word2VecError(
                f"No tokens read from {config.train}: the files hold no text that these "
                f"settings keep (lang {config.lang!r}, skip pattern {config.skip_pattern!r}).")
        msg.info(f"Read {corpus.sentences} sentences, {corpus.tokens} tokens; training "
                 f"word2vec ({dim} dims, skip-gram, {epochs} epochs, {threads} threads)")
        n_vectors = train_vectors(corpus, output / "vectors.txt", dim=dim, window=window,
                                  min_count=min_count, epochs=epochs, threads=threads,
                                  seed=seed)
    except BaseException:
        corpus.path.unlink(missing_ok=True)
        if made and not any(output.iterdir()):
            output.rmdir()  # a failed run leaves no empty OUTPUT_DIR of its own making
        raise
    corpus.path.unlink(missing_ok=True)
    record = {
        "files": [str(p) for p in files],
        "settings": {k: getattr(config, k) for k in (
            "lang", "segmenter", "split_sentences", "max_sentence_tokens", "skip_pattern",
            "seed")},
        "read": ({"pretrain_steps": pretrain_steps, "batch_size": config.batch_size,
                  "window": config.window, "shuffle_buffer": config.shuffle_buffer,
                  "run_token_count": pretrain_steps * config.batch_size * config.window}
                 if pretrain_steps else "one pass"),
        "max_tokens": max_tokens, "sentences": corpus.sentences, "tokens": corpus.tokens,
        "vectors": n_vectors,
        "word2vec": {"dim": dim, "window": window, "min_count": min_count, "epochs": epochs,
                     "sg": 1, "threads": threads, "seed": seed,
                     "gensim": version("gensim")},
        "seconds": round(time.time() - start, 1),
    }
    write_text(output / "corpus.json", json.dumps(record, indent=2, ensure_ascii=False) + "\n")
    return record


def check_outputs(output: Path, config: PretrainConfig, *, overwrite: bool,
                  config_path: Optional[Path] = None) -> None:
    """Before any reading: OUTPUT_DIR is a directory (or will be made), and neither of the
    files written into it is one of the inputs (E025) or, without `overwrite`, exists
    (E026)."""
    inputs: List[Path] = resolve_files(config.train) if config.train else []
    if config_path is not None:
        inputs.append(config_path)
    if str(output) == STDOUT:
        raise ElmoError(Errors.E070.format(what="OUTPUT_DIR"))
    if output.exists() and not output.is_dir():
        guard_output(output, inputs=inputs, overwrite=True, what="OUTPUT_DIR")  # an input: E025
        raise ElmoError(Errors.E028.format(path=output, what="OUTPUT_DIR, where vectors.txt "
                                                            "and corpus.json are written"))
    for name in ("vectors.txt", "corpus.json"):
        guard_output(output / name, inputs=inputs, overwrite=overwrite,
                     what=f"OUTPUT_DIR/{name}")


def main(
    output: Path,
    train: List[str] = typer.Argument(
        None, help="Text files, globs or directories (default: the config's `train`)"),
    pretrain_config: Optional[Path] = None,
    pretrain_steps: int = 0,
    lang: Optional[str] = None,
    segmenter: Optional[str] = None,
    skip_pattern: Optional[str] = None,
    split_sentences: Optional[bool] = None,
    max_tokens: int = 0,
    dim: int = 300,
    window: int = 5,
    min_count: int = 5,
    epochs: int = 5,
    threads: int = 2,
    seed: int = 0,
    overwrite: bool = False,
) -> None:
    """Train skip-gram word2vec vectors on text read exactly as the biLM reads it. Text
    settings come from --pretrain-config (its seed fixes the file order), overridden by the
    flags; --seed is word2vec's. --overwrite replaces OUTPUT_DIR's vectors.txt and
    corpus.json."""
    flags: Dict[str, Any] = {"train": list(train) if train else None, "lang": lang,
                             "segmenter": segmenter, "skip_pattern": skip_pattern,
                             "split_sentences": split_sentences}
    logging.basicConfig(format="%(asctime)s %(message)s", level=logging.INFO)
    try:
        if pretrain_config is not None:
            config = PretrainConfig.from_file(pretrain_config, **flags)
        else:
            config = PretrainConfig(**{k: v for k, v in flags.items() if v is not None})
        check_outputs(output, config, overwrite=overwrite, config_path=pretrain_config)
        record = make_vectors(output, config, pretrain_steps=pretrain_steps,
                              max_tokens=max_tokens, dim=dim, window=window,
                              min_count=min_count, epochs=epochs, threads=threads, seed=seed)
    except (ElmoError, Word2VecError) as err:
        msg.fail(str(err), exits=1)
    msg.good(f"{record['vectors']} vectors of {dim} dims from {record['tokens']} tokens "
             f"({record['seconds']} s) -> {output / 'vectors.txt'}")


if __name__ == "__main__":
    typer.run(main)
