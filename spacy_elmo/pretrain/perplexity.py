"""Full-softmax perplexity of a biLM language model on text: during pretraining (dev) and
for any export that carries its softmax (`spacy-elmo perplexity`)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import torch

from ..bilm.lm import BiLanguageModel, LMBatch
from ..bilm.lstm import LSTMState
from ..bilm.sources import locate
from ..bilm.weights import load_files
from ..errors import ElmoError, Errors
from ..files import read_json_object
from ..validation import check_all, integer
from .batches import BatchMaker, dev_batches
from .checkpoint import CHECKPOINT_NAME
from .corpus import TextSettings, iter_sentences, warn_undecodable
from .export import SNAPSHOT_DIR, SOFTMAX_NAME, read_softmax
from .rundir import CONFIG_NAME, MODEL_DIR
from .stopping import stop_point
from .vocab import VOCAB_NAME, Vocab

# What `spacy-elmo perplexity` takes from the run a model comes from, when it is not given:
# the run's batching (its dev evaluation's) and reading settings, with its own defaults.
RUN_SETTINGS = {"batch_size": 128, "window": 20, **{
    key: getattr(TextSettings(), key) for key in ("lang", "segmenter", "split_sentences",
                                                   "max_sentence_tokens", "skip_pattern")}}


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
    `bilm.sources.locate` takes them): biLM, and softmax.hdf5 and vocab.txt beside it."""
    files = locate(model)
    bilm = load_files(files)
    softmax = read_softmax(files.weights, bilm.options.projection_dim)
    if softmax is None:
        directory = files.weights if files.weights.is_dir() else files.weights.parent
        raise ElmoError(Errors.E115.format(path=directory,
                                           missing=f"{SOFTMAX_NAME} or {VOCAB_NAME}"))
    lm = BiLanguageModel(bilm, len(softmax.vocab))
    with torch.no_grad():
        lm.softmax.weight.copy_(torch.from_numpy(softmax.weight))
        lm.softmax.bias.copy_(torch.from_numpy(softmax.bias))
    return lm.eval(), softmax.vocab


def model_of_run(model: str) -> str:
    """A pretraining run directory stands for its export (RUN/model; E143 without one);
    anything else is returned as it is."""
    path = Path(model)
    if not (path / CHECKPOINT_NAME).is_file():
        return model
    if not (path / MODEL_DIR / VOCAB_NAME).is_file():
        raise ElmoError(Errors.E143.format(path=path))
    return str(path / MODEL_DIR)


def run_of(model: str) -> Optional[Path]:
    """The pretraining run an export belongs to: RUN for RUN/model and for a snapshot
    RUN/snapshots/step_N (the directory or a file in it), when RUN has its config.json."""
    path = Path(model)
    directory = path if path.is_dir() else path.parent
    if not directory.is_dir():
        return None
    directory = directory.resolve()
    for run, name in ((directory.parent, MODEL_DIR), (directory.parent.parent, None)):
        if (run / CONFIG_NAME).is_file() and (
                directory.name == name
                or (name is None and directory.parent.name == SNAPSHOT_DIR)):
            return run
    return None


def run_settings(run: Optional[Path]) -> Dict[str, Any]:
    """The batching and reading settings (`RUN_SETTINGS`' keys) of a run's config.json
    ({} without a run, or with a config.json that cannot be read)."""
    if run is None:
        return {}
    try:
        config = read_json_object(run / CONFIG_NAME, "a pretraining run's config.json")
    except ElmoError:
        return {}
    return {key: config.get(key, default) for key, default in RUN_SETTINGS.items()}


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
