"""Do the biLM's layers tell word senses apart? Nearest-neighbour word sense disambiguation
per layer, the probe of the ELMo paper (Peters et al. 2018, section 5.3, Table 5).

  python -m spacy_elmo_lab.probe_wsd SEMCOR EVAL_SET... [--weights W] [--output probe_wsd.json]

SEMCOR: SemCor 3.0 as JSON lines (`tokens`, multiword expressions joined by `_`, and
`senses`, a list of WordNet sense keys per token; .xz and .gz are read as they are).
EVAL_SET: an all-words set in the unified framework's format (Raganato et al. 2017):
NAME.data.xml with NAME.gold.key.txt beside it, or the directory holding the pair.

For each layer (0: the context-free token layer, then one per LSTM layer, and `mix`: the
`elmo` component's default mix, the equal-weight mean of the layers), each sense's centroid
is the mean vector of its SemCor tokens. An instance takes, among the senses SemCor tags its
lemma with in its coarse part of speech (NOUN, VERB, ADJ, ADV: a sense key's ss_type), the
one whose centroid is nearest in cosine; it is right if that sense is one of its gold keys.
Lemmas SemCor never tags in that part of speech are counted wrong (there is no WordNet
first-sense back-off); their share is reported as the coverage. A multiword expression goes
through the biLM as its separate words (SemCor's `_` and the sets' spaces split it), and its
vector is the mean of its words' vectors. Beside the layers: SemCor's most frequent sense of
the lemma and part of speech (ties: the sense SemCor tags first).
"""

from __future__ import annotations

import json
import lzma
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Set, Tuple

import numpy as np
import typer

from spacy_elmo.bilm import BiLM, load_bilm
from spacy_elmo.bilm.embedder import Embedder
from spacy_elmo.errors import ElmoError, damaged
from spacy_elmo.files.json_io import write_json
from spacy_elmo.pretrain.corpus import open_text

from .errors import Errors
from .messages import user_errors
from .probes import (
    BATCH_SIZE_OPTION,
    OUTPUT_OPTION,
    OVERWRITE_OPTION,
    THREADS_OPTION,
    WEIGHTS_OPTION,
    embedder,
    header,
    layer_label,
    layer_names,
    start,
    with_mix,
)

# WordNet's ss_type (the digit after '%' in a sense key) -> the coarse part of speech of the
# unified framework (5: adjective satellite)
COARSE_POS = {"1": "NOUN", "2": "VERB", "3": "ADJ", "4": "ADV", "5": "ADJ"}
Lemma = Tuple[str, str]  # (lemma, coarse POS)


@dataclass(frozen=True)
class Target:
    """A sense-tagged word: words [start, end) of its sentence (several for a multiword
    expression), its sense keys (gold keys in an evaluation set), lemma and coarse POS."""

    sentence: int
    start: int
    end: int
    keys: Tuple[str, ...]
    lemma: Lemma
    id: str = ""


@dataclass
class WsdSet:
    name: str
    sentences: List[List[str]]
    targets: List[Target]


def sense_lemma(key: str) -> Optional[Lemma]:
    """(lemma, coarse POS) of a WordNet sense key such as 'bank%1:14:00::'; None if it is
    not one."""
    lemma, _, rest = key.partition("%")
    pos = COARSE_POS.get(rest[:1])
    return (lemma.lower(), pos) if lemma and pos and rest[1:2] == ":" else None


def _words(token: str, sep: Optional[str]) -> List[str]:
    words = [w for w in token.split(sep) if w]
    return words or [token]


def read_semcor(path: Path) -> WsdSet:
    """SemCor's sentences (multiword expressions split into their words) and its
    sense-tagged tokens (E220 for a line that is no SemCor sentence, E225 for a bad key)."""
    sentences: List[List[str]] = []
    targets: List[Target] = []
    try:
        with open_text(path) as f:
            for n, line in enumerate(f, 1):
                if not line.strip():
                    continue
                tokens, senses = _semcor_line(line, n, path)
                words: List[str] = []
                for token, keys in zip(tokens, senses, strict=True):
                    first = len(words)
                    words += _words(token, "_")
                    for key in keys:
                        lemma = sense_lemma(key)
                        if lemma is None:
                            raise ElmoError(Errors.E225.format(key=key, line=n, path=path))
                        targets.append(Target(len(sentences), first, len(words), (key,),
                                              lemma))
                sentences.append(words)
    except (OSError, EOFError, lzma.LZMAError, UnicodeDecodeError) as err:
        raise damaged(path, "SemCor JSON lines", err) from None
    if not targets:
        raise ElmoError(Errors.E226.format(path=path))
    return WsdSet("SemCor", sentences, targets)


def _semcor_line(line: str, n: int, path: Path) -> Tuple[List[str], List[List[str]]]:
    try:
        record = json.loads(line)
    except ValueError as err:
        raise ElmoError(Errors.E220.format(line=n, path=path, problem=f"not JSON ({err})")
                        ) from None
    tokens = record.get("tokens") if isinstance(record, dict) else None
    senses = record.get("senses") if isinstance(record, dict) else None
    if not (isinstance(tokens, list) and all(isinstance(t, str) and t for t in tokens)):
        problem = "'tokens' is not a list of words"
    elif not (isinstance(senses, list) and all(
            isinstance(s, list) and all(isinstance(k, str) for k in s) for s in senses)):
        problem = "'senses' is not a list of lists of sense keys"
    elif len(senses) != len(tokens):
        problem = f"{len(tokens)} tokens but {len(senses)} lists of senses"
    else:
        return tokens, senses
    raise ElmoError(Errors.E220.format(line=n, path=path, problem=problem))


def unified_files(path: Path) -> Tuple[Path, Path]:
    """(NAME.data.xml, NAME.gold.key.txt) of a set given as either file or its directory."""
    if not path.exists():
        raise ElmoError(Errors.E001.format(path=path, cwd=Path.cwd()))
    if path.is_dir():
        found = sorted(path.glob("*.data.xml"))
        if len(found) != 1:
            raise ElmoError(Errors.E221.format(
                path=path, problem=f"it holds {len(found)} *.data.xml files, not one"))
        path = found[0]
    if not path.name.endswith(".data.xml"):
        raise ElmoError(Errors.E221.format(path=path, problem="the name does not end in "
                                           ".data.xml"))
    gold = path.with_name(path.name[: -len(".data.xml")] + ".gold.key.txt")
    if not gold.is_file():
        raise ElmoError(Errors.E221.format(path=path, problem=f"no {gold.name} beside it"))
    return path, gold


def read_unified(path: Path) -> WsdSet:
    """An evaluation set: its sentences (an instance of several words split at spaces) and
    instances with their gold keys (E221-E224)."""
    data, gold_path = unified_files(path)
    gold = read_gold(gold_path)
    try:
        root = ET.parse(data).getroot()
    except (ET.ParseError, OSError, UnicodeDecodeError) as err:
        raise damaged(data, "unified-framework XML", err) from None
    sentences: List[List[str]] = []
    targets: List[Target] = []
    missing: List[str] = []
    for sentence in root.iter("sentence"):
        words: List[str] = []
        for node in sentence:
            text = (node.text or "").strip()
            if node.tag not in ("wf", "instance") or (not text and node.tag == "wf"):
                continue
            first = len(words)
            words += _words(text, None) if text else []
            if node.tag == "instance":
                attrs = [node.get(name) for name in ("id", "lemma", "pos")]
                if not all(attrs) or not text:
                    raise ElmoError(Errors.E222.format(
                        path=data, problem=f"an <instance> ({node.get('id') or 'no id'}) lacks "
                        "its id, lemma, pos or text"))
                inst, lemma, pos = (str(a) for a in attrs)
                if inst not in gold:
                    missing.append(inst)
                    continue
                targets.append(Target(len(sentences), first, len(words), gold[inst],
                                      (lemma.lower(), pos.upper()), inst))
        sentences.append(words)
    if missing:
        raise ElmoError(Errors.E223.format(path=gold_path, n=len(missing), data=data,
                                           example=missing[0]))
    if not targets:
        raise ElmoError(Errors.E222.format(path=data, problem="it holds no <instance>"))
    return WsdSet(data.name[: -len(".data.xml")], sentences, targets)


def read_gold(path: Path) -> Dict[str, Tuple[str, ...]]:
    """instance id -> its gold sense keys (one or more), from NAME.gold.key.txt."""
    gold: Dict[str, Tuple[str, ...]] = {}
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as err:
        raise damaged(path, "a gold key file", err) from None
    for n, line in enumerate(lines, 1):
        fields = line.split()
        if not fields:
            continue
        if len(fields) < 2:
            raise ElmoError(Errors.E224.format(line=n, path=path, text=line))
        gold[fields[0]] = tuple(fields[1:])
    return gold


class SenseModel:
    """SemCor's senses of each (lemma, POS) in the order SemCor first tags them, how often
    it tags each, and (once `fit`) every layer's centroid of the senses asked for."""

    def __init__(self, semcor: WsdSet) -> None:
        self.semcor = semcor
        self.senses: Dict[Lemma, List[str]] = {}
        self.counts: Dict[str, int] = {}
        for target in semcor.targets:
            for key in target.keys:
                if key not in self.counts:
                    self.senses.setdefault(target.lemma, []).append(key)
                self.counts[key] = self.counts.get(key, 0) + 1
        self.row: Dict[str, int] = {}
        self.centroids = np.zeros((0, 0, 0), dtype="float32")

    def mfs(self, lemma: Lemma) -> Optional[str]:
        """The most frequent sense (ties: the first tagged); None for an unseen lemma."""
        senses = self.senses.get(lemma)
        return max(senses, key=lambda k: self.counts[k]) if senses else None

    def fit(self, embedder: Embedder, lemmas: Set[Lemma]) -> None:
        """Each layer's (and the mix's) centroid of every sense of `lemmas`, normalised:
        only the SemCor sentences holding such a sense go through the biLM."""
        keys = [k for lemma in sorted(lemmas) for k in self.senses.get(lemma, [])]
        self.row = {key: i for i, key in enumerate(keys)}
        per_sentence: Dict[int, List[Target]] = {}
        for target in self.semcor.targets:
            if any(k in self.row for k in target.keys):
                per_sentence.setdefault(target.sentence, []).append(target)
        order = sorted(per_sentence)
        sums: Optional[np.ndarray] = None
        counts = np.zeros(len(keys))
        sentences = [self.semcor.sentences[i] for i in order]
        for index, layers in zip(order, embedder.embed(sentences), strict=True):
            if sums is None:
                sums = np.zeros((len(keys), layers.shape[0], layers.shape[2]))
            for target in per_sentence[index]:
                vector = layers[:, target.start : target.end].mean(axis=1)
                for key in target.keys:
                    sums[self.row[key]] += vector
                    counts[self.row[key]] += 1
        if sums is None:
            self.centroids = np.zeros((0, 0, 0), dtype="float32")
            return
        self.centroids = normalise(with_mix(sums / counts[:, None, None], axis=1))

    def nearest(self, target: Target, vectors: np.ndarray) -> Optional[np.ndarray]:
        """Per layer, the index into `self.senses[target.lemma]` of the nearest centroid to
        the normalised `vectors` (n_layers, width); None for an unseen lemma."""
        senses = self.senses.get(target.lemma)
        if not senses:
            return None
        similarity = np.einsum("skw,kw->sk", self.centroids[[self.row[k] for k in senses]],
                               vectors)
        return similarity.argmax(axis=0)


def normalise(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=-1, keepdims=True)
    return (vectors / np.maximum(norms, 1e-12)).astype("float32")


def instance_vectors(embedder: Embedder, data: WsdSet) -> np.ndarray:
    """(instances, L+2, width): every layer's normalised vector of each instance, the mix
    last."""
    per_sentence: Dict[int, List[int]] = {}
    for i, target in enumerate(data.targets):
        per_sentence.setdefault(target.sentence, []).append(i)
    order = sorted(per_sentence)
    out: Optional[np.ndarray] = None
    sentences = [data.sentences[i] for i in order]
    for index, layers in zip(order, embedder.embed(sentences), strict=True):
        if out is None:
            out = np.zeros((len(data.targets), layers.shape[0], layers.shape[2]))
        for i in per_sentence[index]:
            target = data.targets[i]
            out[i] = layers[:, target.start : target.end].mean(axis=1)
    assert out is not None  # a set has instances (read_unified)
    return normalise(with_mix(out, axis=1))


def score(model: SenseModel, data: WsdSet, vectors: np.ndarray) -> Dict[str, object]:
    """Accuracy in percent per layer and of the MFS baseline, over all instances (unseen
    lemmas wrong) and over the covered ones; the coverage."""
    names = layer_names(vectors.shape[1] - 1)
    right = np.zeros(len(names))
    mfs = covered = 0
    for target, vector in zip(data.targets, vectors, strict=True):
        picks = model.nearest(target, vector)
        if picks is None:
            continue
        covered += 1
        senses = model.senses[target.lemma]
        right += [senses[p] in target.keys for p in picks]
        mfs += model.mfs(target.lemma) in target.keys
    n = len(data.targets)
    return {"set": data.name, "instances": n, "covered": covered,
            "coverage": 100 * covered / n,
            "layers": {name: 100 * r / n for name, r in zip(names, right, strict=True)},
            "mfs": 100 * mfs / n,
            "layers_covered": {name: 100 * r / max(covered, 1)
                               for name, r in zip(names, right, strict=True)},
            "mfs_covered": 100 * mfs / max(covered, 1)}


def probe(bilm: BiLM, semcor: Path, eval_sets: Sequence[Path], batch_size: int = 64
          ) -> List[Dict[str, object]]:
    """One result per evaluation set (see `score`); every file is read before the biLM
    runs."""
    sets = [read_unified(path) for path in eval_sets]
    model = SenseModel(read_semcor(semcor))
    run = embedder(bilm, batch_size)
    model.fit(run, {t.lemma for data in sets for t in data.targets})
    return [score(model, data, instance_vectors(run, data)) for data in sets]


def cached_probe(weights: Optional[Path], semcor: Optional[Path], eval_set: Optional[Path],
                 cache: Path) -> Dict[str, object]:
    """`probe` of the biLM at `weights` on one set, kept as JSON in `cache` (written
    atomically, so that each biLM is probed once); without the data only a cached result
    is read."""
    if not cache.exists():
        if weights is None or semcor is None or eval_set is None:
            raise FileNotFoundError(f"no WSD result in {cache}, and no data given")
        write_json(cache, probe(load_bilm(weights), semcor, [eval_set])[0])
    return json.loads(cache.read_text(encoding="utf-8"))


NOTE = ("Nearest SemCor sense centroid (cosine) per layer; lemmas SemCor never tags in that "
        "part of speech counted wrong (coverage: the share it tags); a multiword expression "
        "is the mean of its words' vectors; MFS: SemCor's most frequent sense (ties: the "
        "first tagged).")


def report(results: List[Dict[str, object]], title: str) -> str:
    names = list(results[0]["layers"])  # type: ignore[call-overload]
    lines = [title, "", NOTE, "",
             "| set | instances | coverage | " + " | ".join(map(layer_label, names))
             + " | SemCor MFS |", "|---|---:|---:|" + "---:|" * (len(names) + 1)]
    for r in results:
        layers: Dict[str, float] = r["layers"]  # type: ignore[assignment]
        lines.append(f"| {r['set']} | {r['instances']:,} | {r['coverage']:.1f} | "
                     + " | ".join(f"{layers[k]:.1f}" for k in names)
                     + f" | {r['mfs']:.1f} |")
    return "\n".join(lines) + "\n"


def main(semcor: Path = typer.Argument(..., help="SemCor 3.0 as JSON lines (.xz, .gz, "
                                       "plain)"),
         eval_sets: List[Path] = typer.Argument(
             ..., help="Unified-format sets: NAME.data.xml (NAME.gold.key.txt beside it) or "
             "the directory holding the pair"),
         weights: Optional[str] = WEIGHTS_OPTION,
         output: Optional[Path] = OUTPUT_OPTION,
         batch_size: int = BATCH_SIZE_OPTION,
         threads: int = THREADS_OPTION,
         overwrite: bool = OVERWRITE_OPTION) -> None:
    """Nearest-neighbour WSD per biLM layer (SemCor sense centroids), beside SemCor's most
    frequent sense."""
    with user_errors():  # a bad file, setting, output or biLM: its message, not a traceback
        began = time.perf_counter()
        bilm = start(weights, output, [semcor, *eval_sets], batch_size, threads, overwrite)
        results = probe(bilm, semcor, eval_sets, batch_size)
    seconds = time.perf_counter() - began
    typer.echo(report(results, header("probe-wsd", weights, seconds, threads)))
    if output is not None:
        write_json(output, {"weights": weights, "seconds": seconds, "threads": threads,
                            "note": NOTE, "sets": results})


if __name__ == "__main__":
    typer.run(main)
