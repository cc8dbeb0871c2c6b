"""Pretraining throughput on CPU, every training path side by side in one run: tokens/s of
the reference path (autograd LSTM backward, torch's default Adagrad step: the code before the
fast paths) and of the fast paths, with 1 and 2 threads and two batch sizes, as ratios and as
a fraction of the matmul rate measured in the same run; and where the fast step's time goes.

    python benchmarks/bench_pretrain.py --out benchmarks/results/pretrain.md

Shapes: `bundled` (configs/pretrain_en.cfg: the bundled biLM's shape and negatives) and
the presets. bf16 (`--precision bf16`: bf16 copies of the weights, the fused LSTM backward,
one thread a direction) runs only on CPUs with AVX512-BF16 or AMX, or with --force-bf16
(emulated: the bf16 matmul rate in the report shows how slow). Batches are synthetic
(Zipf-distributed random words, so the number of distinct tokens per window is realistic)
and go through the real `BatchMaker` and `BiLanguageModel`. FLOPs are counted analytically
(multiply-adds x 2; backward = 2 x forward).
"""

from __future__ import annotations

import argparse
import datetime
import os
import random
import string
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, List, Tuple

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before torch starts (see README)

import torch

from spacy_elmo.bilm import BiLM, BiLMOptions, preset
from spacy_elmo.bilm.directions import concurrent_directions
from spacy_elmo.bilm.hardware import (
    ALLOW_EMULATED_BF16,
    cpu_flags,
    cpu_isa,
    cpu_model,
    native_bf16,
)
from spacy_elmo.bilm.lm import BiLanguageModel, LMBatch
from spacy_elmo.pretrain.batches import BatchMaker
from spacy_elmo.pretrain.config import PretrainConfig
from spacy_elmo.pretrain.optim import make_optimizer
from spacy_elmo.pretrain.trainer import update
from spacy_elmo.pretrain.vocab import Vocab

ROOT = Path(__file__).resolve().parents[1]


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


def matmul_rate(n: int = 1024, repeats: int = 10, dtype: torch.dtype = torch.float32
                ) -> float:
    a, b = torch.randn(n, n).to(dtype), torch.randn(n, n).to(dtype)
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

    config = PretrainConfig(train=["synthetic"], optimizer="adagrad", lr=0.2)
    optimizer = make_optimizer(config, model)  # the trainer's own
    for p in model.parameters():
        p.grad = torch.zeros_like(p)

    def step() -> None:
        torch.nn.utils.clip_grad_norm_(model.parameters(), config.clip_norm)
        optimizer.step()

    return {"char CNN": cnn, "LSTM": lstm, "softmax": softmax, "optimizer": step}


@dataclass(frozen=True)
class StepPath:
    """One way of running a training step."""

    name: str
    lstm_backward: str  # "autograd" (the reference) or "fused"
    fused_optimizer: bool
    precision: str  # "fp32" or "bf16"
    directions: str  # `concurrent_directions` mode: "off", or "auto" (the trainer's default)


PATHS = {
    "reference": StepPath("reference (autograd LSTM, default Adagrad)", "autograd", False,
                          "fp32", "off"),
    "fast": StepPath("fast (fused LSTM backward, fused Adagrad)", "fused", True, "fp32", "off"),
    "fast-directions": StepPath("fast + directions on two threads (the default)", "fused",
                                True, "fp32", "auto"),
    "fast-bf16": StepPath("fast + bf16 (one thread a direction)", "fused", True, "bf16",
                          "auto"),
}


def shape_options(shape: str) -> Tuple[BiLMOptions, int]:
    """The model of a shape name and its configured negatives: a preset, or 'bundled' (the
    shape and negatives of configs/pretrain_en.cfg, the bundled biLM's run)."""
    if shape != "bundled":
        return preset(shape), 8192
    config = PretrainConfig.from_file(ROOT / "configs" / "pretrain_en.cfg")
    return config.bilm_options(), config.n_negatives


def make_vocab(n_vocab: int) -> Vocab:
    rng = random.Random(1)
    words = {"".join(rng.choices(string.ascii_lowercase, k=rng.randint(2, 10)))
             for _ in range(2 * n_vocab)}
    return Vocab(sorted(words)[: n_vocab - 3])


def step_fn(path: StepPath, options: BiLMOptions, vocab: Vocab, *, rows: int, window: int,
            n_negatives: int, threads: int) -> Tuple[Callable[[], object], LMBatch,
                                                     BiLanguageModel]:
    """A training step (forward, backward, clip, optimizer) of a fresh model on one path:
    the fast paths run the trainer's own update (`trainer.update`) and optimizer
    (`optim.make_optimizer`, Adagrad as the bundled biLM's recipe); the reference path the
    code before them (autograd's LSTM backward, torch's unfused Adagrad)."""
    torch.manual_seed(0)
    model = BiLanguageModel(BiLM(options), len(vocab), n_negatives=n_negatives,
                            dropout=0.1).train()
    model.bilm.lstm.set_fused_backward(path.lstm_backward == "fused")
    model.set_training_precision(path.precision)
    config = PretrainConfig(train=["synthetic"], optimizer="adagrad", lr=0.2, window=window,
                            batch_size=rows, n_negatives=n_negatives, precision=path.precision)
    if path.fused_optimizer:
        optimizer = make_optimizer(config, model)
    else:
        optimizer = torch.optim.Adagrad(model.parameters(), lr=config.lr,
                                        initial_accumulator_value=1.0)
    batch = synthetic_batch(vocab, options, rows, window)

    def train_step() -> None:
        torch.set_num_threads(threads)
        with concurrent_directions(path.directions):
            out = model(batch)
            update(config, model, optimizer, out.mean_loss, config.lr)

    return train_step, batch, model


def run_all(args: argparse.Namespace) -> Tuple[List[Dict[str, object]], Dict[str, float]]:
    """Every (shape, path, threads, rows) case timed round-robin in one process."""
    vocab = make_vocab(args.vocab)
    paths = [p for p in args.paths.split(",")]
    if "fast-bf16" in paths and not native_bf16(torch.device("cpu")):
        if args.force_bf16:
            os.environ[ALLOW_EMULATED_BF16] = "1"
        else:
            paths.remove("fast-bf16")  # emulated: slow; the matmul rates say how slow
    cases: Dict[str, Callable[[], object]] = {}
    meta: Dict[str, Dict[str, object]] = {}
    for shape in args.shapes.split(","):
        options, negatives = shape_options(shape)
        negatives = args.negatives or negatives
        for path in paths:
            for threads in [int(t) for t in args.threads.split(",")]:
                for rows in [int(r) for r in args.rows.split(",")]:
                    if path not in ("fast", "fast-directions") and rows != int(
                            args.rows.split(",")[0]):
                        continue  # other row counts only for the fast paths
                    key = f"{shape}|{path}|{threads}|{rows}"
                    fn, batch, model = step_fn(PATHS[path], options, vocab, rows=rows,
                                               window=args.window, n_negatives=negatives,
                                               threads=threads)
                    cases[key] = fn
                    meta[key] = {"shape": shape, "path": path, "threads": threads,
                                 "rows": rows, "tokens": rows * args.window,
                                 "flops": sum(flops(options, batch, negatives).values()),
                                 "negatives": negatives, "unique": batch.chars.shape[0]}
                    if path == "fast-directions" and threads == max(
                            int(t) for t in args.threads.split(",")):
                        meta[key]["parts"] = part_fns(model, batch)
    rates = {f"fp32 {t} thread(s)": 0.0 for t in args.threads.split(",")}
    rates["bf16 2 thread(s)"] = 0.0

    def measure_rates() -> None:
        for t in args.threads.split(","):
            torch.set_num_threads(int(t))
            key = f"fp32 {t} thread(s)"
            rates[key] = max(rates[key], matmul_rate(args.matmul_n))
        torch.set_num_threads(2)
        rates["bf16 2 thread(s)"] = max(rates["bf16 2 thread(s)"],
                                        matmul_rate(256, 3, torch.bfloat16))

    measure_rates()
    best = best_times(cases, args.repeats)
    measure_rates()  # again after: the machine may be shared
    results = []
    for key, seconds in best.items():
        m = meta[key]
        row: Dict[str, object] = {**m, "step": seconds,
                                  "tokens_per_s": float(m["tokens"]) / seconds,  # type: ignore
                                  "flop_rate": float(m["flops"]) / seconds}  # type: ignore
        if "parts" in m:
            torch.set_num_threads(int(m["threads"]))  # type: ignore[call-overload]
            with concurrent_directions(PATHS[str(m["path"])].directions):
                row["parts"] = best_times(m["parts"], args.repeats)  # type: ignore[arg-type]
        results.append(row)
    return results, rates


def report(results: List[Dict[str, object]], rates: Dict[str, float],
           args: argparse.Namespace, command: str) -> str:
    flags = sorted({"avx2", "avx512f", "avx512_bf16", "amx_bf16"} & cpu_flags())
    emulated = args.force_bf16 and not native_bf16(torch.device("cpu"))
    lines = [
        "# Pretraining throughput (CPU), every path side by side in one run", "",
        f"Command: `{command}`", "",
        f"{datetime.date.today().isoformat()}; CPU: {cpu_model()} (flags: "
        f"{', '.join(flags) or 'none of avx2/avx512/bf16'}; {cpu_isa()}"
        f"{'; bf16 EMULATED (forced)' if emulated else ''}"
        f"); torch {torch.__version__}; "
        f"OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY', '')}. Best of {args.repeats} "
        "round-robin repeats per figure. Matmul rates measured in the same run (before and "
        "after, the higher kept): " + ", ".join(f"{k} {v / 1e9:.1f} GFLOP/s"
                                                for k, v in rates.items()) + ".", "",
        "| shape | path | threads | batch | step (s) | tokens/s | vs reference, same threads "
        "| vs reference, 1 thread | vs fast, 1 thread | GFLOP/s | of matmul (same threads) |",
        "| --- | --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    ref = {(r["shape"], r["threads"]): r["tokens_per_s"] for r in results
           if r["path"] == "reference"}
    fast = {(r["shape"], r["rows"]): r["tokens_per_s"] for r in results
            if r["path"] == "fast" and r["threads"] == 1}
    for r in results:
        same = ref.get((r["shape"], r["threads"]))
        one = ref.get((r["shape"], 1))
        fast_one = fast.get((r["shape"], r["rows"]))
        rate = rates[f"fp32 {r['threads']} thread(s)"]
        tps = float(r["tokens_per_s"])  # type: ignore[arg-type]
        lines.append(
            f"| {r['shape']} | {PATHS[str(r['path'])].name} | {r['threads']} | "
            f"{r['rows']}x{args.window} | {r['step']:.3f} | {tps:,.0f} | "
            f"{f'{tps / float(same):.2f}x' if same else '-'} | "  # type: ignore[arg-type]
            f"{f'{tps / float(one):.2f}x' if one else '-'} | "  # type: ignore[arg-type]
            f"{f'{tps / float(fast_one):.2f}x' if fast_one else '-'} | "  # type: ignore
            f"{float(r['flop_rate']) / 1e9:.1f} | "  # type: ignore[arg-type]
            f"{float(r['flop_rate']) / rate:.0%} |")  # type: ignore[arg-type]
    lines += ["", "## Where the fast path's time goes (forward + backward of each part alone)",
              "", "| shape | threads | batch | part | time (s) | share of the parts |",
              "| --- | ---: | --- | --- | ---: | ---: |"]
    for r in results:
        if "parts" not in r:
            continue
        parts: Dict[str, float] = r["parts"]  # type: ignore[assignment]
        total = sum(parts.values())
        for part, seconds in parts.items():
            lines.append(f"| {r['shape']} | {r['threads']} | {r['rows']}x{args.window} | "
                         f"{part} | {seconds:.3f} | {seconds / total:.0%} |")
    return "\n".join(lines) + "\n"


def main(argv: List[str]) -> str:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--threads", default="1,2", help="thread counts, comma-separated")
    parser.add_argument("--rows", default="64,128",
                        help="rows per batch; the first for every path, the rest fast only")
    parser.add_argument("--window", type=int, default=20)
    parser.add_argument("--vocab", type=int, default=50_000)
    parser.add_argument("--negatives", type=int, default=None,
                        help="default: the shape's own (bundled: its config's; presets: 8192)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--matmul-n", type=int, default=1024)
    parser.add_argument("--shapes", default="bundled,small")
    parser.add_argument("--paths", default="reference,fast,fast-directions,fast-bf16")
    parser.add_argument("--force-bf16", action="store_true",
                        help="time bf16 even where this CPU only emulates it (very slow)")
    parser.add_argument("--out", default="benchmarks/results/pretrain.md")
    args = parser.parse_args(argv)
    results, rates = run_all(args)
    command = "python benchmarks/bench_pretrain.py " + " ".join(argv)
    text = report(results, rates, args, command.strip())
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(text, encoding="utf-8")
    print(text)
    return text


if __name__ == "__main__":
    main(sys.argv[1:])
