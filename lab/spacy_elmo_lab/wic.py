"""Does a biLM tell word senses apart? A WiC (word-in-context) probe.

  python -m spacy_elmo_lab.wic WEIGHTS WIC_DIR [--out results.md] [--json results.json]

WEIGHTS: biLM weights (a directory with options.json + weights.hdf5, or the weights file);
`spacy_elmo/data/elmo_en_small` is the bundled English biLM. WIC_DIR: the WiC release layout,
`train/train.data.txt` + `train/train.gold.txt` and `dev/dev.data.txt` + `dev/dev.gold.txt`
(tab-separated `word  PoS  i1-i2  sentence1  sentence2`, T/F gold labels).

For each layer (0 = the context-free token layer, then one per LSTM layer) and for the mean
of all layers: the cosine of the target word's vectors in the two sentences, a threshold
fitted on train (cosine >= threshold means the same sense), and the accuracy on train and
dev. This is the published ELMo baseline's protocol (57.7 test accuracy; chance 50).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch
import typer

from spacy_elmo.bilm import load_bilm
from spacy_elmo.files.atomic import write_text
from spacy_elmo.files.guard import guard_output
from spacy_elmo.files.json_io import write_json
from spacy_elmo.validation import check_all, integer

from .messages import user_errors


@dataclass
class WicPair:
    word: str
    tokens: Tuple[List[str], List[str]]
    index: Tuple[int, int]
    same: bool


def read_wic(wic_dir: Path, split: str) -> List[WicPair]:
    """The pairs of one split, from `{split}/{split}.data.txt` and `.gold.txt` (or the
    same files directly in `wic_dir`)."""
    base = wic_dir / split if (wic_dir / split).is_dir() else wic_dir
    data, gold = base / f"{split}.data.txt", base / f"{split}.gold.txt"
    for path in (data, gold):
        if not path.exists():
            raise typer.BadParameter(f"no {path}: WIC_DIR must hold {split}/{path.name}")
    labels = gold.read_text(encoding="utf-8").split()
    lines = data.read_text(encoding="utf-8").splitlines()
    while lines and not lines[-1].strip():  # blank lines at the end
        lines.pop()
    if len(labels) != len(lines):
        raise typer.BadParameter(f"{gold} has {len(labels)} labels for the {len(lines)} "
                                 f"pairs of {data}: one T or F per pair, in the same order")
    for n, label in enumerate(labels):
        if label not in ("T", "F"):
            raise typer.BadParameter(f"{gold}: label {n + 1} is {label!r}, not T or F")
    pairs: List[WicPair] = []
    for n, line in enumerate(lines):
        fields = line.split("\t")
        if len(fields) != 5:
            raise typer.BadParameter(f"{data}:{n + 1}: expected 5 tab-separated fields")
        word, _, positions, first, second = fields
        try:
            i, j = (int(p) for p in positions.split("-"))
        except ValueError:
            raise typer.BadParameter(f"{data}:{n + 1}: the target positions {positions!r} "
                                     "are not I-J (two word indices)") from None
        tokens = (first.split(" "), second.split(" "))
        if not (0 <= i < len(tokens[0]) and 0 <= j < len(tokens[1])):
            raise typer.BadParameter(f"{data}:{n + 1}: target index out of the sentence")
        pairs.append(WicPair(word, tokens, (i, j), labels[n] == "T"))
    return pairs


def target_vectors(bilm, pairs: Sequence[WicPair], batch_size: int) -> np.ndarray:
    """(pairs, 2, L+1, width): every layer's vector of the target in both sentences."""
    from spacy_elmo.bilm.embedder import Embedder

    embedder = Embedder(bilm, batch_size=batch_size, layers="all")
    sentences = [p.tokens[k] for p in pairs for k in (0, 1)]
    targets = [p.index[k] for p in pairs for k in (0, 1)]
    embedded = embedder.embed(sentences)
    out = np.stack([layers[:, i] for i, layers in zip(targets, embedded, strict=True)])
    return out.reshape(len(pairs), 2, *out.shape[1:])


def cosines(vectors: np.ndarray) -> np.ndarray:
    """(pairs, 2, n, width) -> (pairs, n) cosine of the two sentences' vectors."""
    a, b = vectors[:, 0], vectors[:, 1]
    norms = np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1)
    return (a * b).sum(-1) / np.maximum(norms, 1e-12)


def fit_threshold(scores: np.ndarray, same: np.ndarray) -> Tuple[float, float]:
    """The threshold (score >= t means same) with the best accuracy, and that accuracy;
    candidates are the midpoints between consecutive sorted scores."""
    values = np.unique(scores)
    candidates = np.concatenate([[values[0] - 1.0], (values[1:] + values[:-1]) / 2,
                                 [values[-1] + 1.0]])
    accuracy = [float(((scores >= t) == same).mean()) for t in candidates]
    best = int(np.argmax(accuracy))
    return float(candidates[best]), accuracy[best]


def probe(bilm, wic_dir: Path, batch_size: int = 64) -> List[Dict[str, object]]:
    """One row per layer and for the mean of the layers: threshold, train and dev
    accuracy (in percent)."""
    splits = {split: read_wic(wic_dir, split) for split in ("train", "dev")}
    scores, labels = {}, {}
    for split, pairs in splits.items():
        vectors = target_vectors(bilm, pairs, batch_size)
        mean = vectors.mean(axis=2, keepdims=True)
        scores[split] = cosines(np.concatenate([vectors, mean], axis=2))
        labels[split] = np.array([p.same for p in pairs])
    n_layers = scores["train"].shape[1] - 1
    rows: List[Dict[str, object]] = []
    for k in range(n_layers + 1):
        threshold, train_acc = fit_threshold(scores["train"][:, k], labels["train"])
        dev_acc = float(((scores["dev"][:, k] >= threshold) == labels["dev"]).mean())
        rows.append({"layer": "mean" if k == n_layers else str(k), "threshold": threshold,
                     "train": 100 * train_acc, "dev": 100 * dev_acc})
    return rows


def chosen(rows: List[Dict[str, object]]) -> Dict[str, object]:
    """The row of the layer (or the mean) with the best train accuracy: the probe's answer."""
    return max(rows, key=lambda r: float(r["train"]))  # type: ignore[arg-type]


def cached_probe(weights: Path, wic_dir: Optional[Path], cache: Path
                 ) -> List[Dict[str, object]]:
    """`probe` of the biLM at `weights`, kept as JSON in `cache` (written atomically) so that
    a rerun does not embed WiC again; without `wic_dir` only a cached result is read."""
    if not cache.exists():
        if wic_dir is None:
            raise FileNotFoundError(f"no WiC result in {cache}, and no WiC directory given")
        write_json(cache, probe(load_bilm(weights), wic_dir))
    return json.loads(cache.read_text(encoding="utf-8"))


def report(rows: List[Dict[str, object]], weights: Path, seconds: float) -> str:
    lines = [f"WiC probe of `{weights}` ({seconds:.0f} s): cosine threshold fitted on train",
             "", "| layer | threshold | train acc | dev acc |", "|---|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['layer']} | {r['threshold']:.3f} | {r['train']:.1f} | "
                     f"{r['dev']:.1f} |")
    best = chosen(rows)
    lines += ["", f"Layer chosen on train: {best['layer']}, dev accuracy {best['dev']:.1f} "
              "(chance 50.0; published ELMo 57.7 on test)."]
    return "\n".join(lines) + "\n"


def main(weights: Path = typer.Argument(..., help="biLM weights (directory or file)"),
         wic_dir: Path = typer.Argument(..., help="WiC directory with train/ and dev/"),
         out: Optional[Path] = typer.Option(None, "--out", help="Write the table here"),
         json_out: Optional[Path] = typer.Option(None, "--json", help="Rows as JSON"),
         batch_size: int = typer.Option(64, "--batch-size"),
         threads: int = typer.Option(2, "--threads"),
         overwrite: bool = typer.Option(False, "--overwrite",
                                        help="Replace existing --out and --json files")) -> None:
    """Probe the biLM on WiC: each layer's train and dev accuracy of the cosine threshold."""
    with user_errors():  # a bad setting, output or biLM: its message, not a traceback
        check_all({"--batch-size": batch_size, "--threads": threads},
                  {"--batch-size": integer(1), "--threads": integer(1)})
        outputs = [(path, flag) for path, flag in ((out, "--out"), (json_out, "--json"))
                   if path is not None]
        for path, flag in outputs:
            guard_output(path, inputs=[weights, wic_dir], overwrite=overwrite, what=flag)
        if out is not None and out == json_out:
            raise typer.BadParameter("--out and --json must be different files")
        torch.set_num_threads(threads)
        start = time.perf_counter()
        rows = probe(load_bilm(weights), wic_dir, batch_size)
    text = report(rows, weights, time.perf_counter() - start)
    typer.echo(text)
    if out is not None:
        write_text(out, text)
    if json_out is not None:
        write_json(json_out, rows)


if __name__ == "__main__":
    typer.run(main)
