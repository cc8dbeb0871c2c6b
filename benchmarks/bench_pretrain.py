"""Pretraining throughput on CPU: tokens/s, achieved FLOP/s as a fraction of a matmul
measured in the same run, and where a training step's time goes.

    python benchmarks/bench_pretrain.py --threads 2 --out benchmarks/results/pretrain.md

Batches are synthetic (Zipf-distributed random words, so the number of distinct tokens per
window is realistic) and go through the real `BatchMaker`, `BiLanguageModel` and Adagrad.
FLOPs are counted analytically (multiply-adds x 2; backward = 2 x forward).
"""

from __future__ import annotations

import argparse
import random
import string
import sys
import time
from pathlib import Path
from typing import Callable, Dict, List

import torch

from spacy_elmo.bilm import BiLM, BiLMOptions, preset
from spacy_elmo.bilm.lm import BiLanguageModel, LMBatch
from spacy_elmo.pretrain.batches import BatchMaker
from spacy_elmo.pretrain.vocab import Vocab


def best_time(fn: Callable[[], object], repeats: int) -> float:
    return best_times({"fn": fn}, repeats)["fn"]


def best_times(fns: Dict[str, Callable[[], object]], repeats: int) -> Dict[str, float]:
    """Best time of each function, timed round-robin so that a burst of load from other
    processes on the shared machine hits one repeat of each rather than all of one."""
    for fn in fns.values():
        fn()
    best = {name: float("inf") for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - start)
    return best


def matmul_rate(n: int = 1024, repeats: int = 10) -> float:
    a, b = torch.randn(n, n), torch.randn(n, n)
    return 2 * n**3 / best_time(lambda: a @ b, repeats)


def synthetic_batch(vocab: Vocab, options: BiLMOptions, rows: int, window: int,
                    seed: int = 0) -> LMBatch:
    rng = random.Random(seed)
    weights = [1.0 / (k + 1) for k in range(len(vocab) - 3)]
    words = rng.choices(vocab.words[3:], weights=weights, k=2 * rows * (window + 1))
    fwd = [words[r * (window + 1) : (r + 1) * (window + 1)] for r in range(rows)]
    bwd = [list(reversed(row)) for row in fwd]
    maker = BatchMaker(vocab, options.max_characters_per_token)
    return maker.make([[r[:-1] for r in fwd], [r[:-1] for r in bwd]],
                      [[r[1:] for r in fwd], [r[1:] for r in bwd]], window)


def flops(options: BiLMOptions, batch: LMBatch, n_negatives: int) -> Dict[str, float]:
    """Training FLOPs per step (forward x 3) of each part."""
    o = options
    n_unique = batch.chars.shape[0]
    C, E, F, P, H = (o.max_characters_per_token, o.char_embed_dim, o.n_filters,
                     o.projection_dim, o.lstm_dim)
    conv = sum(n * w * E * (C - w + 1) for w, n in o.filters)
    cnn = n_unique * 2 * (conv + o.n_highway * F * 2 * F + F * P)
    tokens = int(batch.lengths.sum())
    lstm = 2 * o.n_layers * tokens * 2 * (2 * P * 4 * H + H * P)
    softmax = 2 * tokens * 2 * (n_negatives + 1) * P
    return {"char CNN": 3 * cnn, "LSTM": 3 * lstm, "softmax": 3 * softmax}


def part_fns(model: BiLanguageModel, batch: LMBatch) -> Dict[str, Callable[[], object]]:
    """Forward + backward of each part alone, on the shapes of a real step."""
    bilm = model.bilm
    with torch.no_grad():
        vectors = bilm.encoder(batch.chars)
        x = vectors[batch.index]
        top = bilm.lstm(x[0], x[1], batch.lengths)[0][-1]

    def cnn() -> None:
        bilm.encoder(batch.chars).sum().backward()

    x_leaf = x.clone().requires_grad_(True)

    def lstm() -> None:
        out = bilm.lstm(x_leaf[0], x_leaf[1], batch.lengths)[0]
        sum(o.sum() for o in out).backward()

    hidden = top.reshape(-1, top.shape[-1]).clone().requires_grad_(True)
    targets = batch.targets.reshape(-1)

    def softmax() -> None:
        model.softmax.sampled_nll(hidden, targets, n_negatives=model.n_negatives).sum()\
            .backward()

    optimizer = torch.optim.Adagrad(model.parameters(), lr=0.2, initial_accumulator_value=1.0)
    for p in model.parameters():
        p.grad = torch.zeros_like(p)

    def step() -> None:
        torch.nn.utils.clip_grad_norm_(model.parameters(), 10.0)
        optimizer.step()

    return {"char CNN": cnn, "LSTM": lstm, "softmax": softmax, "optimizer": step}


def bench(name: str, *, rows: int, window: int, n_vocab: int, n_negatives: int,
          repeats: int) -> Dict[str, object]:
    torch.manual_seed(0)
    rng = random.Random(1)
    words = {"".join(rng.choices(string.ascii_lowercase, k=rng.randint(2, 10)))
             for _ in range(2 * n_vocab)}
    vocab = Vocab(sorted(words)[: n_vocab - 3])
    options = preset(name)
    model = BiLanguageModel(BiLM(options), len(vocab), n_negatives=n_negatives).train()
    optimizer = torch.optim.Adagrad(model.parameters(), lr=0.2, initial_accumulator_value=1.0)
    batch = synthetic_batch(vocab, options, rows, window)

    def train_step() -> None:
        out = model(batch)
        optimizer.zero_grad(set_to_none=True)
        out.mean_loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 10.0)
        optimizer.step()

    parts = best_times({"step": train_step, **part_fns(model, batch)}, repeats)
    step = parts.pop("step")
    counted = flops(options, batch, n_negatives)
    return {"name": name, "rows": rows, "window": window, "unique": batch.chars.shape[0],
            "step": step, "tokens_per_s": rows * window / step, "parts": parts,
            "flops": counted, "flop_rate": sum(counted.values()) / step}


def report(results: List[Dict[str, object]], rate: float, args: argparse.Namespace) -> str:
    lines = [
        "# Pretraining throughput (CPU)", "",
        f"Command: `python benchmarks/bench_pretrain.py --threads {args.threads} "
        f"--rows {args.rows} --window {args.window} --vocab {args.vocab} "
        f"--negatives {args.negatives} --out {args.out}`", "",
        f"torch {torch.__version__}, {args.threads} thread(s); fp32 matmul "
        f"({args.matmul_n}^3) measured in the same run: **{rate / 1e9:.1f} GFLOP/s**. "
        "Best of several repeats per figure (the machine is shared).", "",
        "| preset | batch | distinct tokens | step (s) | tokens/s | achieved GFLOP/s | "
        "fraction of matmul |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in results:
        lines.append(f"| {r['name']} | {r['rows']}x{r['window']} | {r['unique']} | "
                     f"{r['step']:.3f} | {r['tokens_per_s']:.0f} | "
                     f"{r['flop_rate'] / 1e9:.1f} | {r['flop_rate'] / rate:.0%} |")
    lines += ["", "## Where the time goes (forward + backward of each part alone)", "",
              "| preset | part | time (s) | share of the parts | GFLOP | GFLOP/s | "
              "fraction of matmul |", "| --- | --- | --- | --- | --- | --- | --- |"]
    for r in results:
        parts = r["parts"]
        total = sum(parts.values())  # type: ignore[union-attr]
        for part, seconds in parts.items():  # type: ignore[union-attr]
            gflop = r["flops"].get(part, 0.0) / 1e9  # type: ignore[union-attr]
            speed = f"{gflop / seconds:.1f}" if gflop else "-"
            frac = f"{gflop * 1e9 / seconds / rate:.0%}" if gflop else "-"
            lines.append(f"| {r['name']} | {part} | {seconds:.3f} | {seconds / total:.0%} | "
                         f"{gflop:.2f} | {speed} | {frac} |")
    return "\n".join(lines) + "\n"


def main(argv: List[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rows", type=int, default=64)
    parser.add_argument("--window", type=int, default=20)
    parser.add_argument("--vocab", type=int, default=50_000)
    parser.add_argument("--negatives", type=int, default=8192)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--matmul-n", type=int, default=1024)
    parser.add_argument("--presets", default="tiny,small")
    parser.add_argument("--out", default="benchmarks/results/pretrain.md")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    rate = matmul_rate(args.matmul_n)
    results = [bench(name, rows=args.rows, window=args.window, n_vocab=args.vocab,
                     n_negatives=args.negatives, repeats=args.repeats)
               for name in args.presets.split(",")]
    rate = max(rate, matmul_rate(args.matmul_n))  # again after: the machine is shared
    text = report(results, rate, args)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(text, encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main(sys.argv[1:])
