"""What a server runs: a biLM alone (any source `spacy-elmo embed` takes), or a saved spaCy
pipeline with an `elmo` component (its biLM for /v1/embed, the whole pipeline for /v1/parse).

Embedding goes through `bilm.embedder.Embedder`, as `spacy-elmo embed` does, in its
deterministic mode: a sentence's vectors do not depend on the rest of its batch, so the
answers equal `embed`'s for the same sentence alone (up to float32 rounding). Only the
batcher's worker thread calls `run`, so the model, spaCy's tokenizers and their string
stores are used by one thread; texts are tokenized inside a memory zone (spaCy >= 3.8), so
strings of past requests do not pile up in a long-running server.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ContextManager, Dict, List, Optional, Sequence, Tuple

import numpy as np
import spacy
import torch
from spacy.language import Language

from .. import __version__
from ..bilm import BiLM, load_bilm
from ..bilm.embedder import Embedder, mix_layers, place, reduce_layers
from ..bilm.precision import check_precision
from ..bilm.windows import MAX_BATCH_TOKENS
from ..checksums import tensors_sha256
from ..errors import ElmoError, Errors, first_line
from ..files.names import PIPELINE_CONFIG, PIPELINE_META
from ..ml.elmo_model import configure, get_holder, settings_of
from ..ml.settings import ElmoSettings
from ..pipeline.component import ElmoComponent
from .batcher import CONTINUE
from .inputs import ClientError, EmbedJob, ParseJob, check_tokens


@dataclass
class Embedded:
    """One /v1/embed answer: an array a sentence, and the tokens of texts."""

    layers: str
    width: int
    arrays: List[np.ndarray]
    tokens: Optional[List[List[str]]] = None


@dataclass
class Parsed:
    """One /v1/parse answer: Doc.to_json() a text, with doc._.elmo when asked."""

    docs: List[Dict[str, Any]]
    vectors: Optional[List[np.ndarray]] = None


def is_pipeline_dir(path: Path) -> bool:
    """A saved spaCy pipeline: a directory with config.cfg and meta.json."""
    return (path.is_dir() and (path / PIPELINE_CONFIG).is_file()
            and (path / PIPELINE_META).is_file())


def open_served(source: Optional[str], *, options: Optional[str] = None,
                weights_format: str = "auto", lang: str = "en",
                device: torch.device = torch.device("cpu"), gpu_id: int = -1,
                precision: Optional[str] = None,
                max_batch_tokens: int = MAX_BATCH_TOKENS) -> Served:
    """Load what `spacy-elmo serve SOURCE` runs: a pipeline directory, else a biLM from
    anything `load_bilm` takes (None: the biLM bundled for `lang`). `precision` None keeps
    a pipeline's own (fp32 for a biLM)."""
    if source is not None and is_pipeline_dir(Path(source)):
        return _open_pipeline(Path(source), gpu_id=gpu_id, precision=precision,
                              max_batch_tokens=max_batch_tokens)
    check_precision(precision or "fp32", device)  # before a long load or download
    bilm = load_bilm(source, options, format=weights_format, lang=lang).to(device)
    settings = ElmoSettings(precision=precision or "fp32", max_batch_tokens=max_batch_tokens)
    embedder = settings.embedder(bilm)
    return Served(embedder, source="bundled" if source is None else source, lang=lang)


def _open_pipeline(path: Path, *, gpu_id: int, precision: Optional[str],
                   max_batch_tokens: int) -> Served:
    if gpu_id >= 0:
        try:
            spacy.require_gpu(gpu_id)
        except (ValueError, ImportError) as err:
            raise ElmoError(Errors.E219.format(gpu_id=gpu_id, err=first_line(err))) from err
    if precision is not None:  # before the pipeline loads
        check_precision(precision, torch.device("cuda", gpu_id) if gpu_id >= 0
                        else torch.device("cpu"))
    try:
        nlp = spacy.load(path)
    except (OSError, ValueError) as err:  # spaCy's own errors, with its codes
        if isinstance(err, ElmoError):
            raise
        raise ElmoError(str(err)) from err
    found = [(name, pipe) for name, pipe in nlp.pipeline if isinstance(pipe, ElmoComponent)]
    if not found:
        raise ElmoError(Errors.E218.format(path=path, pipes=", ".join(nlp.pipe_names) or
                                           "none"))
    name, component = found[0]
    component.ensure_loaded()
    model = component.model
    bilm = get_holder(model).bilm
    assert bilm is not None  # ensure_loaded
    settings = settings_of(model)
    if precision is not None:
        settings = configure(model, precision=precision)  # checked here (E150-E152)
    embedder = settings.replace(max_batch_tokens=max(max_batch_tokens,
                                                     settings.max_batch_tokens)).embedder(bilm)
    return Served(embedder, source=str(path), lang=nlp.lang or "xx", nlp=nlp,
                  component=component, component_name=name)


class Served:
    """A biLM's embedder, and for a pipeline the pipeline; `run` runs a batch of jobs."""

    def __init__(self, embedder: Embedder, *, source: str, lang: str,
                 nlp: Optional[Language] = None, component: Optional[ElmoComponent] = None,
                 component_name: Optional[str] = None) -> None:
        self.embedder = embedder
        self.bilm: BiLM = embedder.bilm
        self.lang = lang
        self.nlp = nlp
        self.component = component
        self._tokenizers: Dict[str, Language] = {}
        options = self.bilm.options
        self.n_layers = options.n_output_layers
        self.width = options.output_dim
        model: Dict[str, Any] = {"kind": "bilm" if nlp is None else "pipeline",
                                 "source": source, "lang": lang}
        if nlp is not None:
            model.update(name=f"{nlp.meta.get('lang', lang)}_{nlp.meta.get('name', '')}",
                         version=nlp.meta.get("version"), components=nlp.pipe_names,
                         elmo_component=component_name)
        self.info: Dict[str, Any] = {
            "version": __version__, "model": model,
            "shape": {"layers": self.n_layers, "width": self.width,
                      "lstm_dim": options.lstm_dim, "projection_dim": options.projection_dim,
                      "lstm_layers": options.n_layers,
                      "max_characters_per_token": options.max_characters_per_token},
            "precision": self.bilm.precision,
            "checksum": "sha256:" + tensors_sha256(self.bilm.state_dict())}

    @property
    def kinds(self) -> Sequence[str]:
        """The kinds of job this model runs: "embed", and "parse" for a pipeline."""
        return ("embed",) if self.nlp is None else ("embed", "parse")

    def run(self, kind: str, jobs: List[Any]) -> List[Any]:
        """One outcome a job (a result, or the job's ClientError), in order."""
        return self._embed(jobs) if kind == "embed" else self._parse(jobs)

    def measure(self, kind: str, job: Any, step_tokens: int) -> Tuple[int, int]:
        """A job's next step in tokens, each window with its <S> and </S>, and the tokens of
        all its steps left. An embed job
        runs as the windows `embed` cuts its sentences into, a step of them at a time (about
        `step_tokens`, at least one window); its texts are tokenized on the first call (E203
        when they are more than the request's limit, E210 for a language without a
        tokenizer). A parse job runs whole: its tokens, each text's <S> and </S>."""
        if kind == "embed":
            return self._plan(job, step_tokens)
        nlp = self.nlp
        assert nlp is not None  # the app routes parse jobs to pipelines only
        with memory_zone(nlp):
            lengths = [len(nlp.make_doc(text)) for text in job.texts]
        check_tokens(sum(lengths), job.max_tokens)
        cost = sum(lengths) + 2 * len(lengths)
        return cost, cost

    def _plan(self, job: EmbedJob, step_tokens: Optional[int]) -> Tuple[int, int]:
        """Cut the job into windows (once), choose its next step (None: all it has left);
        its cost, and what is left."""
        if job.pieces is None:
            sentences = job.sentences
            if sentences is None:
                sentences = job.tokens = self._tokenize(job.texts or [], job.lang,
                                                        job.max_tokens)
            job.pieces = [p for i, tokens in enumerate(sentences)
                          for p in self.embedder.pieces(i, tokens)]
            job.outputs = [None] * len(sentences)
        end, cost = job.done, 0
        while end < len(job.pieces) and (end == job.done or step_tokens is None or cost + len(
                job.pieces[end].words) + 2 <= step_tokens):
            cost += len(job.pieces[end].words) + 2
            end += 1
        job.step_end = end
        return cost, sum(len(p.words) + 2 for p in job.pieces[job.done:])

    # /v1/embed ------------------------------------------------------------------------
    def _embed(self, jobs: List[EmbedJob]) -> List[Any]:
        """Run each job's step (planned by `measure`; without it, the whole job), and answer
        each finished job; the others get CONTINUE."""
        outcomes: List[Any] = [None] * len(jobs)
        steps: List[tuple] = []
        for i, job in enumerate(jobs):
            try:
                if job.pieces is None:
                    self._plan(job, None)
            except ClientError as err:
                outcomes[i] = err
                continue
            assert job.pieces is not None
            steps.append((i, job.pieces[job.done:job.step_end]))
        arrays = iter(self.embedder.run_pieces([p for _, pieces in steps for p in pieces]))
        for i, pieces in steps:  # only now, with every window run, does a job move on
            job = jobs[i]
            for piece in pieces:
                place(job.outputs, piece, next(arrays), len(job.sentence(piece.source)))
            job.done = job.step_end
            if job.done < len(job.pieces or ()):
                outcomes[i] = CONTINUE
                continue
            try:
                reduced = [self._reduce(array, job) for array in job.outputs]
            except ClientError as err:
                outcomes[i] = err
                continue
            outcomes[i] = Embedded(layers=job.layers, width=self.width, arrays=reduced,
                                   tokens=job.tokens if job.texts is not None else None)
        return outcomes

    def _reduce(self, layers: np.ndarray, job: EmbedJob) -> np.ndarray:
        """(L+1, n, width) -> what the job asks for (mix: the request's weights, else the
        pipeline's own mix, else equal weights); E270 when the request's gamma overflows."""
        if job.layers == "mix":
            if self.component is not None and job.mix_weights is None and job.gamma is None:
                return self.component.fixed_mix(layers)
            gamma = 1.0 if job.gamma is None else job.gamma
            with np.errstate(over="ignore", invalid="ignore"):
                mixed = mix_layers(layers, job.mix_weights, gamma)
            if not np.isfinite(mixed).all():
                raise ClientError(Errors.E270.format(gamma=gamma), 422)
            return mixed
        return reduce_layers(torch.from_numpy(layers), job.layers).numpy()

    def _tokenize(self, texts: List[str], lang: Optional[str], max_tokens: int
                  ) -> List[List[str]]:
        """Each text's tokens (whitespace tokens left out, as the `elmo` component does);
        E203 when there are more than `max_tokens`."""
        nlp = self._tokenizer(lang)
        with memory_zone(nlp):
            sentences = [[t.text for t in nlp.make_doc(text) if not t.is_space]
                         for text in texts]
        check_tokens(sum(len(s) for s in sentences), max_tokens)
        return sentences

    def _tokenizer(self, lang: Optional[str]) -> Language:
        """The pipeline (which tokenizes its own language only), or a blank spaCy pipeline
        for `lang` (default: the server's), made once."""
        if self.nlp is not None:
            if lang not in (None, self.nlp.lang):
                raise ClientError(Errors.E210.format(
                    lang=lang, err=f"this server's pipeline tokenizes {self.nlp.lang!r} only",
                    fix="Leave `lang` out, or send `sentences` as tokens."), 422)
            return self.nlp
        lang = lang or self.lang
        if lang not in self._tokenizers:
            try:
                self._tokenizers[lang] = spacy.blank(lang)
            except Exception as err:  # noqa: BLE001 (unknown code, or a missing package)
                raise ClientError(Errors.E210.format(
                    lang=lang, err=first_line(err),
                    fix="Give a spaCy language code whose tokenizer runs on the server "
                        "(some need packages of their own), or send `sentences`."), 422
                ) from err
        return self._tokenizers[lang]

    # /v1/parse ------------------------------------------------------------------------
    def _parse(self, jobs: List[ParseJob]) -> List[Any]:
        nlp = self.nlp
        assert nlp is not None  # the app routes parse jobs to pipelines only
        outcomes: List[Any] = [None] * len(jobs)
        with memory_zone(nlp):
            docs_of: List[tuple] = []
            for i, job in enumerate(jobs):
                docs = [nlp.make_doc(text) for text in job.texts]
                try:
                    check_tokens(sum(len(doc) for doc in docs), job.max_tokens)
                except ClientError as err:
                    outcomes[i] = err
                    continue
                docs_of.append((i, docs))
            done = iter(list(nlp.pipe(doc for _, docs in docs_of for doc in docs)))
            for i, docs in docs_of:
                parsed = [next(done) for _ in docs]
                outcomes[i] = Parsed(
                    docs=[doc.to_json() for doc in parsed],
                    vectors=[doc._.elmo for doc in parsed] if jobs[i].elmo else None)
        return outcomes


def memory_zone(nlp: Language) -> ContextManager[Any]:
    """`nlp.memory_zone()` where spaCy has it (3.8), else nothing."""
    zone = getattr(nlp, "memory_zone", None)
    return zone() if zone is not None else contextlib.nullcontext()
