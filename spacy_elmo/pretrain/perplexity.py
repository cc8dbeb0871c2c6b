"""Full-softmax perplexity of a biLM language model on text: during pretraining (dev) and
for any export that carries its softmax (`spacy-elmo perplexity`: `PerplexityJob`)."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import torch

from ..bilm.io.sources import locate
from ..bilm.io.weights import load_files
from ..bilm.lm import BiLanguageModel, LMBatch
from ..bilm.lstm import LSTMState
from ..errors import ElmoError, Errors
from ..files import names
from ..files.guard import STDOUT, check_writable_path, guard_output
from ..files.json_io import write_json
from ..validation import check_all, integer, regex, thread_count
from .batches import BatchMaker, dev_batches
from .config import PretrainConfig
from .corpus import TextSettings, iter_sentences, resolve_files, warn_undecodable
from .export import read_softmax
from .rundir import recorded
from .stopping import stop_point
from .vocab import Vocab

# How `spacy-elmo perplexity` batches the text of a model that is in no run
DEFAULT_ROWS = 64
DEFAULT_WINDOW = 20


def evaluate_lm(model: BiLanguageModel, batches: Sequence[LMBatch],
                device: Union[str, torch.device] = "cpu") -> Dict[str, float]:
    """Forward, backward and mean (exp of the mean of the two losses) perplexity over
    batches read in order, the LSTM state carried from one window to the next."""
    was_training = model.training
    model.eval()
    sums, counts = [0.0, 0.0], [0, 0]
    state: Optional[LSTMState] = None
    try:
        with torch.no_grad():
            for batch in batches:
                stop_point()  # a run asked to stop leaves its evaluation
                out = model(batch.to(torch.device(device)), state)
                state = out.state
                sums[0] += float(out.loss_fwd)
                sums[1] += float(out.loss_bwd)
                counts[0] += out.n_fwd
                counts[1] += out.n_bwd
    finally:
        model.train(was_training)
    fwd, bwd = sums[0] / max(counts[0], 1), sums[1] / max(counts[1], 1)
    return {"dev_ppl_fwd": math.exp(fwd), "dev_ppl_bwd": math.exp(bwd),
            "dev_ppl": math.exp(0.5 * (fwd + bwd)), "dev_tokens": counts[0]}


def load_lm(model: Union[str, Path]) -> Tuple[BiLanguageModel, Vocab]:
    """The language model of an export (`model`: its directory or weights file, as
    `bilm.io.sources.locate` takes them): biLM, and softmax.hdf5 and vocab.txt beside it."""
    files = locate(model)
    bilm = load_files(files)
    softmax = read_softmax(files.weights, bilm.options.projection_dim)
    if softmax is None:
        directory = files.weights if files.weights.is_dir() else files.weights.parent
        raise ElmoError(Errors.E115.format(path=directory,
                                           missing=f"{names.SOFTMAX_NAME} or {names.VOCAB_NAME}"))
    lm = BiLanguageModel.for_evaluation(bilm, len(softmax.vocab))
    with torch.no_grad():
        lm.softmax.weight.copy_(torch.from_numpy(softmax.weight))
        lm.softmax.bias.copy_(torch.from_numpy(softmax.bias))
    return lm, softmax.vocab


def model_of_run(model: str) -> str:
    """A pretraining run directory stands for its export (RUN/model; E143 without one);
    anything else is returned as it is."""
    path = Path(model)
    if not (path / names.CHECKPOINT_NAME).is_file():
        return model
    if not (path / names.MODEL_DIR / names.VOCAB_NAME).is_file():
        raise ElmoError(Errors.E143.format(path=path))
    return str(path / names.MODEL_DIR)


def run_of(model: str) -> Optional[Path]:
    """The pretraining run an export belongs to: RUN for RUN/model and for a snapshot
    RUN/snapshots/step_N (the directory or a file in it), when RUN has its config.json."""
    path = Path(model)
    directory = path if path.is_dir() else path.parent
    if not directory.is_dir():
        return None
    directory = directory.resolve()
    for run, name in ((directory.parent, names.MODEL_DIR), (directory.parent.parent, None)):
        if (run / names.CONFIG_NAME).is_file() and (
                directory.name == name
                or (name is None and directory.parent.name == names.SNAPSHOT_DIR)):
            return run
    return None


def reading_of(run: Optional[PretrainConfig], *, lang: Optional[str] = None,
               segmenter: Optional[str] = None, skip_pattern: Optional[str] = None
               ) -> TextSettings:
    """How to read text for a model: as the run it comes from read its text (whitespace
    tokens for a model in no run), with the settings given instead; the run's segmenter
    goes with the run's language only."""
    base = run.text_settings() if run is not None else TextSettings()
    same_lang = lang is None or lang == base.lang
    return replace(base, lang=lang or base.lang,
                   segmenter=segmenter if segmenter is not None or not same_lang
                   else base.segmenter,
                   skip_pattern=skip_pattern if skip_pattern is not None else base.skip_pattern)


def _same_files(files: Sequence[Path], patterns: Optional[Sequence[str]]) -> bool:
    """Whether `files` are those `patterns` name (False when they name none that exist)."""
    if not patterns:
        return False
    try:
        named = resolve_files(list(patterns), what="perplexity")
    except ElmoError:  # moved or deleted since the run
        return False
    return [p.resolve() for p in files] == [p.resolve() for p in named]


def read_sentences(files: Sequence[Path], settings: TextSettings, vocab: Vocab,
                   max_tokens: Optional[int]) -> List[List[str]]:
    """Sentences of the files in order, up to exactly `max_tokens` tokens (None: all; the
    last sentence is cut there); refuses text with no in-vocabulary word."""
    sentences: List[List[str]] = []
    n_tokens = 0
    skipped = [0]
    for sentence in iter_sentences(files, settings, counter=skipped):
        if max_tokens is not None:
            sentence = sentence[: max_tokens - n_tokens]
        sentences.append(sentence)
        n_tokens += len(sentence)
        if max_tokens is not None and n_tokens >= max_tokens:
            break
    warn_undecodable(skipped[0], files, "reading the dev/perplexity text")
    if n_tokens == 0:
        raise ElmoError(Errors.E144.format(paths=[str(p) for p in files]))
    if not any(vocab[w] != vocab.unk for s in sentences for w in s):
        raise ElmoError(Errors.E103.format(paths=[str(p) for p in files], n_tokens=n_tokens))
    return sentences


def text_perplexity(model: BiLanguageModel, vocab: Vocab, files: Sequence[Path],
                    settings: TextSettings, *, rows: int = 64, window: int = 20,
                    max_tokens: Optional[int] = None) -> Dict[str, float]:
    """Perplexity on text files, batched as pretraining's dev evaluation; also per
    character ("ppl_per_char": the same total loss spread over the characters predicted,
    each sentence boundary counted as one), which compares models that segment the same
    text differently (Chinese characters vs words). "tokens": the text's tokens read
    (`max_tokens` at most); "dev_tokens": the tokens predicted, one more per sentence
    (its end)."""
    check_all({"rows": rows, "window": window, "max_tokens": max_tokens},
              {"rows": integer(1), "window": integer(1),
               "max_tokens": integer(1, optional=True)}, Errors.E020)
    sentences = read_sentences(files, settings, vocab, max_tokens)
    maker = BatchMaker(vocab, model.bilm.options.max_characters_per_token)
    result = evaluate_lm(model, dev_batches(sentences, maker, rows=rows, window=window))
    n_words = sum(len(s) for s in sentences)
    n_chars = sum(len(w) for s in sentences for w in s) + result["dev_tokens"] - n_words
    result["ppl_per_char"] = math.exp(math.log(result["dev_ppl"]) * result["dev_tokens"]
                                      / max(n_chars, 1))
    result["tokens"] = n_words
    return result


@dataclass
class PerplexityJob:
    """One `spacy-elmo perplexity` measurement, checked and resolved before any work: the
    model (an export; a run stands for RUN/model), the text files, how they are read and
    batched (what is not given is the run's, as its dev evaluation, so that the run's dev
    text gives the figure in its metrics.jsonl), and the JSON file for the figures."""

    model: str
    text: List[str]
    files: List[Path]
    settings: TextSettings
    rows: int
    window: int
    run: Optional[Path] = None
    max_tokens: Optional[int] = None
    threads: Optional[int] = None
    output: Optional[Path] = None

    @classmethod
    def prepare(cls, model: str, text: List[str], *, lang: Optional[str] = None,
                segmenter: Optional[str] = None, skip_pattern: Optional[str] = None,
                max_tokens: Optional[int] = None, rows: Optional[int] = None,
                window: Optional[int] = None, threads: Optional[int] = None,
                output: Optional[Path] = None, overwrite: bool = False) -> PerplexityJob:
        """The job for the command's arguments (the flags' names in errors): each checked,
        and an --output that would replace an input refused, before the model is read."""
        if STDOUT in text:  # the same '-' that means standard input elsewhere
            raise ElmoError(Errors.E145)
        check_all({k: v for k, v in {"--rows": rows, "--window": window}.items()
                   if v is not None}, {"--rows": integer(1), "--window": integer(1)},
                  Errors.E020)
        check_all({"--max-tokens": max_tokens, "--threads": threads,
                   "--skip-pattern": skip_pattern},
                  {"--max-tokens": integer(1, optional=True),
                   "--threads": thread_count(optional=True),
                   "--skip-pattern": regex(optional=True)}, Errors.E020)
        if output is not None:  # a path that can never be written: before anything else
            check_writable_path(output, "a file name for --output")
        source = model_of_run(model)
        files = resolve_files(text, what="perplexity")
        if output is not None:
            where = Path(source)
            guard_output(output, inputs=[Path(model), where if where.is_dir() else
                                         where.parent, *files],
                         overwrite=overwrite, what="--output")
        run = run_of(source)
        found = recorded(run) if run is not None else None
        if max_tokens is None and found is not None and _same_files(files, found.dev):
            max_tokens = found.dev_max_tokens  # the run's dev text: as much as the run read
        return cls(source, list(text), files,
                   reading_of(found, lang=lang, segmenter=segmenter, skip_pattern=skip_pattern),
                   rows or (found.batch_size if found else DEFAULT_ROWS),
                   window or (found.window if found else DEFAULT_WINDOW),
                   run=run, max_tokens=max_tokens, threads=threads, output=output)

    def measure(self) -> Dict[str, Any]:
        """The figures of `text_perplexity`, with the settings they were measured with."""
        if self.threads:
            torch.set_num_threads(self.threads)
        lm, vocab = load_lm(self.model)
        result = text_perplexity(lm, vocab, self.files, self.settings, rows=self.rows,
                                 window=self.window, max_tokens=self.max_tokens)
        return {"model": self.model, "text": self.text, "rows": self.rows,
                "window": self.window, "lang": self.settings.lang, **result}

    def write(self, figures: Dict[str, Any]) -> None:
        """The figures as JSON in `output` (E009 when it cannot be written)."""
        assert self.output is not None
        try:
            write_json(self.output, figures)
        except OSError as err:
            raise ElmoError(Errors.E009.format(path=self.output, err=err)) from err
