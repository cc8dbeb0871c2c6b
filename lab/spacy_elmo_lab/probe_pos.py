"""Which layers carry syntax? A linear part-of-speech classifier per biLM layer, the probe of
the ELMo paper (Peters et al. 2018, section 5.3, Table 6), on a Universal Dependencies
treebank (UD English EWT: XPOS are the Penn Treebank tags, UPOS the universal ones).

  python -m spacy_elmo_lab.probe_pos UD_DIR [--weights W] [--output probe_pos.json]

UD_DIR holds the treebank's train, dev and test files (`*-ud-train.conllu` or
`train.conllu`, and so on). For each layer (0: the context-free token layer, then one per
LSTM layer, and `mix`: the `elmo` component's default mix, the equal-weight mean of the
layers) and each tag set, a softmax classifier over the layer's vector alone (standardised
with the training tokens' mean and spread) is trained on train with Adam, for each L2 weight
of `--l2`, for `--epochs` epochs (the rate decayed linearly to 0); the L2 weight and epoch
with the best dev accuracy are kept and scored on test. The words of multiword tokens are
the biLM's tokens (the ranges and empty nodes are skipped); dev and test tags never seen in
training are counted wrong.
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

from spacy_elmo.bilm import BiLM, load_bilm
from spacy_elmo.bilm.embedder import Embedder
from spacy_elmo.errors import ElmoError, damaged, warn
from spacy_elmo.files.json_io import write_json
from spacy_elmo.validation import check_all, integer

from .errors import Errors, Warnings
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
)

TAGSETS = ("xpos", "upos")
COLUMN = {"upos": 3, "xpos": 4}  # CoNLL-U columns
L2 = (0.0, 1e-4)
EPOCHS = 8
STEP_ROWS = 1024  # tokens per Adam step
LEARNING_RATE = 1e-2  # decayed linearly to 0 over the epochs


@dataclass
class Tagged:
    """A split's sentences (the words) and every token's tags, per tag set."""

    sentences: List[List[str]]
    tags: Dict[str, List[str]]


def read_conllu(path: Path) -> Tagged:
    """The words and UPOS/XPOS tags of a CoNLL-U file (E227 for a malformed word line)."""
    sentences: List[List[str]] = []
    tags: Dict[str, List[str]] = {tagset: [] for tagset in TAGSETS}
    words: List[str] = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as err:
        raise damaged(path, "a CoNLL-U file", err) from None
    for n, line in enumerate(lines + [""], 1):
        if not line.strip():
            if words:
                sentences.append(words)
                words = []
            continue
        if line.startswith("#"):
            continue
        columns = line.split("\t")
        if len(columns) != 10 or not columns[0] or not columns[1]:
            raise ElmoError(Errors.E227.format(line=n, path=path, text=line))
        if "-" in columns[0] or "." in columns[0]:  # a multiword token's range, an empty node
            continue
        words.append(columns[1])
        for tagset, column in COLUMN.items():
            tags[tagset].append(columns[column])
    return Tagged(sentences, tags)


def split_file(ud_dir: Path, split: str) -> Path:
    """The treebank's file of `split` (E228 unless exactly one matches)."""
    if not ud_dir.is_dir():
        raise ElmoError(Errors.E001.format(path=ud_dir, cwd=Path.cwd()))
    patterns = (f"*-ud-{split}.conllu", f"{split}.conllu")
    found = sorted({p for pattern in patterns for p in ud_dir.glob(pattern)})
    if len(found) != 1:
        detail = " or ".join(patterns) + (f"; found {len(found)}: give one" if found else "")
        raise ElmoError(Errors.E228.format(path=ud_dir, split=split, patterns=detail))
    return found[0]


def features(run: Embedder, data: Tagged) -> np.ndarray:
    """(L+2, tokens, width): every token's vector of each layer, the mix last."""
    arrays = list(run.embed(data.sentences))
    layers = np.concatenate(arrays, axis=1) if arrays else np.zeros((0, 0, 0), "float32")
    return np.concatenate([layers, layers.mean(axis=0, keepdims=True)], axis=0)


@dataclass
class Fit:
    l2: float
    epochs: int
    dev: float
    test: Optional[float]


def fit_layer(train: Tuple[np.ndarray, np.ndarray], dev: Tuple[np.ndarray, np.ndarray],
              test: Optional[Tuple[np.ndarray, np.ndarray]], n_classes: int,
              l2_grid: Sequence[float], epochs: int, seed: int) -> Fit:
    """The linear classifier of one layer: for each L2 weight, `epochs` epochs of Adam over
    the shuffled training tokens (the rate decayed linearly to 0), dev accuracy after each;
    the best (the first on ties) is scored on test. Labels -1 (tags unseen in training)
    are always wrong."""
    mean = train[0].mean(axis=0)
    spread = train[0].std(axis=0) + 1e-6
    x_train, x_dev = (torch.from_numpy((x - mean) / spread) for x in (train[0], dev[0]))
    y_train = torch.from_numpy(train[1])
    best: Optional[Tuple[float, float, int, Dict[str, torch.Tensor]]] = None
    steps = epochs * -(-len(y_train) // STEP_ROWS)
    for l2 in l2_grid:
        torch.manual_seed(seed)
        order = torch.Generator().manual_seed(seed)
        linear = torch.nn.Linear(x_train.shape[1], n_classes)
        optimizer = torch.optim.Adam(linear.parameters(), lr=LEARNING_RATE)
        schedule = torch.optim.lr_scheduler.LinearLR(optimizer, 1.0, 0.0, total_iters=steps)
        for epoch in range(1, epochs + 1):
            for rows in torch.randperm(len(y_train), generator=order).split(STEP_ROWS):
                loss = torch.nn.functional.cross_entropy(linear(x_train[rows]), y_train[rows])
                if l2:
                    loss = loss + l2 * linear.weight.pow(2).sum()
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                schedule.step()
            accuracy = _accuracy(linear, x_dev, dev[1])
            if best is None or accuracy > best[0]:
                state = {k: v.detach().clone() for k, v in linear.state_dict().items()}
                best = (accuracy, l2, epoch, state)
    assert best is not None  # l2_grid and epochs are not empty (checked by the caller)
    test_accuracy = None
    if test is not None:
        linear = torch.nn.Linear(x_train.shape[1], n_classes)
        linear.load_state_dict(best[3])
        test_accuracy = _accuracy(linear, torch.from_numpy((test[0] - mean) / spread), test[1])
    return Fit(best[1], best[2], best[0], test_accuracy)


def _accuracy(linear: torch.nn.Linear, x: torch.Tensor, y: np.ndarray) -> float:
    with torch.no_grad():
        predicted = linear(x).argmax(dim=1).numpy()
    return 100 * float((predicted == y).mean()) if len(y) else 0.0


def labels(tags: Sequence[str], index: Dict[str, int]) -> np.ndarray:
    return np.array([index.get(t, -1) for t in tags], dtype=np.int64)


def probe(bilm: BiLM, ud_dir: Path, tagsets: Sequence[str] = TAGSETS, *, test: bool = True,
          l2_grid: Sequence[float] = L2, epochs: int = EPOCHS, seed: int = 0,
          batch_size: int = 64) -> Dict[str, object]:
    """Per tag set and layer: the selected L2 weight and epochs, dev and (with `test`) test
    accuracy in percent; the token counts. The files are read before the biLM runs."""
    splits = ("train", "dev", "test") if test else ("train", "dev")
    data = {split: read_conllu(split_file(ud_dir, split)) for split in splits}
    for split, tagged in data.items():
        if not tagged.sentences:
            raise ElmoError(Errors.E229.format(
                split=split, path=split_file(ud_dir, split),
                what="train on" if split == "train" else "score"))
    run = embedder(bilm, batch_size)
    vectors = {split: features(run, tagged) for split, tagged in data.items()}
    names = layer_names(vectors["train"].shape[0] - 1)
    results: Dict[str, object] = {
        "tokens": {split: len(tagged.tags["upos"]) for split, tagged in data.items()}}
    for tagset in tagsets:
        index = {t: i for i, t in enumerate(sorted(set(data["train"].tags[tagset])))}
        y = {split: labels(tagged.tags[tagset], index) for split, tagged in data.items()}
        for split in splits[1:]:
            unseen = sorted({t for t in data[split].tags[tagset] if t not in index})
            if unseen:
                shown = ", ".join(unseen[:5]) + (", ..." if len(unseen) > 5 else "")
                warn(Warnings.W035.format(n=int((y[split] < 0).sum()), split=split,
                                          tagset=tagset.upper(), tags=shown))
        rows = {}
        for k, name in enumerate(names):
            fit = fit_layer((vectors["train"][k], y["train"]), (vectors["dev"][k], y["dev"]),
                            (vectors["test"][k], y["test"]) if test else None, len(index),
                            l2_grid, epochs, seed)
            rows[name] = {"l2": fit.l2, "epochs": fit.epochs, "dev": fit.dev, "test": fit.test}
        results[tagset] = {"classes": len(index), "layers": rows}
    return results



def cached_probe(weights: Optional[Path], ud_dir: Optional[Path], cache: Path) -> Dict[str, object]:
    """The XPOS probe of the biLM at `weights` without the test split (train, and dev for
    the choice and the score), kept as JSON in `cache` (written atomically, so that each biLM
    is probed once); without `ud_dir` only a cached result is read."""
    if not cache.exists():
        if weights is None or ud_dir is None:
            raise FileNotFoundError(f"no POS result in {cache}, and no UD directory given")
        write_json(cache, probe(load_bilm(weights), ud_dir, ("xpos",), test=False))
    return json.loads(cache.read_text(encoding="utf-8"))


def report(results: Dict[str, object], tagsets: Sequence[str], title: str) -> str:
    tokens: Dict[str, int] = results["tokens"]  # type: ignore[assignment]
    first: Dict[str, Dict[str, Dict[str, object]]] = results[tagsets[0]]  # type: ignore
    names = list(first["layers"])
    lines = [title, "", "Linear classifier per layer (Adam, L2 weight and epoch chosen on "
             "dev); tokens: " + ", ".join(f"{s} {n:,}" for s, n in tokens.items()), "",
             "| tags | split | " + " | ".join(map(layer_label, names)) + " |",
             "|---|---|" + "---:|" * len(names)]
    for tagset in tagsets:
        rows: Dict[str, Dict[str, object]] = results[tagset]["layers"]  # type: ignore
        for split in ("dev", "test"):
            if rows[names[0]][split] is None:
                continue
            lines.append(f"| {tagset.upper()} | {split} | " + " | ".join(
                f"{rows[k][split]:.2f}" for k in names) + " |")
    return "\n".join(lines) + "\n"


def parse_tagsets(text: str) -> List[str]:
    tagsets = [t.strip().lower() for t in text.split(",") if t.strip()]
    for tagset in tagsets or [text]:
        if tagset not in TAGSETS:
            raise ElmoError(Errors.E012.format(value=tagset, name="--tagsets",
                                               choices=list(TAGSETS)))
    return tagsets


def parse_l2(text: str) -> List[float]:
    try:
        values = [float(v) for v in text.split(",")]
    except ValueError:
        values = []
    if not values or not all(np.isfinite(v) and v >= 0 for v in values):
        raise ElmoError(Errors.E020.format(key="--l2", what="comma-separated numbers >= 0",
                                           value=repr(text), fix=" E.g. --l2 0,1e-4."))
    return values


def main(ud_dir: Path = typer.Argument(..., help="A UD treebank directory with its train, "
                                       "dev and test .conllu files"),
         weights: Optional[str] = WEIGHTS_OPTION,
         output: Optional[Path] = OUTPUT_OPTION,
         tagsets: str = typer.Option("xpos,upos", "--tagsets", help="xpos, upos or both"),
         l2: str = typer.Option(",".join(map(str, L2)), "--l2", help="L2 weights to choose "
                                "from on dev"),
         epochs: int = typer.Option(EPOCHS, "--epochs"),
         seed: int = typer.Option(0, "--seed"),
         batch_size: int = BATCH_SIZE_OPTION,
         threads: int = THREADS_OPTION,
         overwrite: bool = OVERWRITE_OPTION) -> None:
    """A linear part-of-speech classifier per biLM layer: trained on train, chosen on dev,
    scored on test."""
    with user_errors():  # a bad file, setting, output or biLM: its message, not a traceback
        began = time.perf_counter()
        chosen, l2_grid = parse_tagsets(tagsets), parse_l2(l2)
        check_all({"--epochs": epochs, "--seed": seed},
                  {"--epochs": integer(1), "--seed": integer(0)})
        bilm = start(weights, output, [ud_dir], batch_size, threads, overwrite)
        results = probe(bilm, ud_dir, chosen, l2_grid=l2_grid, epochs=epochs, seed=seed,
                        batch_size=batch_size)
    seconds = time.perf_counter() - began
    typer.echo(report(results, chosen, header("probe-pos", weights, seconds, threads)))
    if output is not None:
        write_json(output, {"weights": weights, "seconds": seconds, "threads": threads,
                            "l2": l2_grid, "epochs": epochs, "seed": seed, **results})


if __name__ == "__main__":
    typer.run(main)
