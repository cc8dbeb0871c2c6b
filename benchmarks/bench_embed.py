"""Throughput of the exact biLM forward pass, side by side with this machine's matmul rate.

Random weights in the published shapes; 32 sentences of 10-30 real news tokens (cut from the
AllenNLP fixture's sentences); one batch; best of `--repeats` timings per column:
  no cache   : BiLM without a word cache (each distinct token of the batch is encoded once)
  cache cold : a fresh WordCache, first pass (same work as no cache, plus the cache)
  cache warm : the same batch again (every token comes from the cache)
GFLOP/s counts the straightforward computation's FLOPs: for each distinct token the full char
CNN over all positions, highway and projection (skipped when the cache is warm), and every
LSTM step (boundaries included). "of matmul" divides it by fp32 matmul rates measured in the
same run, between the model timings: a 1024x1024 square and the model's own recurrent shape
(32 rows x projection -> 4 x LSTM dim).

    python benchmarks/bench_embed.py [--quick] [--threads 2] [--output results/embed.md]
"""

from __future__ import annotations

import os

# Idle OpenMP threads sleep instead of spinning: on a shared machine a spinning pool makes
# every parallel op wait for a descheduled thread (40x slower small ops, measured here).
# Must be set before torch starts its thread pool; an explicit setting wins.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse  # noqa: E402
import datetime  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Dict, Optional, Sequence  # noqa: E402

import torch  # noqa: E402
from spacy_elmo_lab.timing import best_time, make_sentences  # noqa: E402

from spacy_elmo.bilm import BiLM, BiLMOptions, WordCache, batch_to_ids, preset  # noqa: E402
from spacy_elmo.bilm.hardware import cpu_model  # noqa: E402
from spacy_elmo.files.atomic import write_text  # noqa: E402

ALLENNLP_TOKENS_PER_S = {"small": 1400, "medium": 900, "original": 300}
MODES = ("no cache", "cache cold", "cache warm")


def encoder_flops(o: BiLMOptions) -> int:
    """FLOPs to encode one token: char CNN over every position, highway, projection."""
    conv = sum((o.max_characters_per_token - w + 1) * o.char_embed_dim * w * n
               for w, n in o.filters)
    F = o.n_filters
    return 2 * (conv + o.n_highway * F * 2 * F + F * o.projection_dim)


def lstm_flops_per_step(o: BiLMOptions) -> int:
    """FLOPs of one timestep, both directions, all layers."""
    P, H = o.projection_dim, o.lstm_dim
    return 2 * o.n_layers * 2 * (2 * P * 4 * H + H * P)


def matmul_rate(rows: int, inner: int, cols: int, repeats: int) -> float:
    """Best fp32 GFLOP/s of a (rows x inner) @ (inner x cols) product."""
    a, b = torch.randn(rows, inner), torch.randn(inner, cols)
    a @ b
    n = max(1, int(2e8 // (rows * inner * cols)))  # ~0.4 GFLOP per timing
    seconds = best_time(lambda: [a @ b for _ in range(n)], repeats)
    return 2 * rows * inner * cols * n / seconds / 1e9


def time_mode(bilm: BiLM, ids: torch.Tensor, mode: str, repeats: int) -> float:
    """Best seconds per forward pass of `ids` in one of MODES."""
    bilm.word_cache = WordCache() if mode == "cache warm" else None
    if mode == "cache warm":
        bilm(ids)  # fill the cache

    def run() -> None:
        if mode == "cache cold":
            bilm.word_cache = WordCache()
        bilm(ids)

    return best_time(run, repeats)


def bench_size(name: str, sentences: Sequence[Sequence[str]], repeats: int) -> Dict[str, float]:
    """Tokens/s per mode, GFLOP/s, and the matmul rates measured alongside."""
    torch.manual_seed(0)
    options = preset(name)
    bilm = BiLM(options).eval()
    ids = batch_to_ids(sentences)
    n_tokens = sum(len(s) for s in sentences)
    n_steps = n_tokens + 2 * len(sentences)
    n_distinct = len({tuple(row) for row in ids.flatten(0, 1).tolist() if any(row)}) + 2
    result: Dict[str, float] = {"params": sum(p.numel() for p in bilm.parameters())}
    square, lstm_shape = [], []
    with torch.inference_mode():
        bilm(ids)  # warm-up
        for mode in MODES:
            result[mode] = n_tokens / time_mode(bilm, ids, mode, repeats)
            square.append(matmul_rate(1024, 1024, 1024, repeats))
            lstm_shape.append(matmul_rate(32, options.projection_dim, 4 * options.lstm_dim,
                                          repeats))
    steps = n_steps * lstm_flops_per_step(options)
    for mode in MODES:
        encoded = 0 if mode == "cache warm" else n_distinct * encoder_flops(options)
        result[f"gflops {mode}"] = (steps + encoded) * result[mode] / n_tokens / 1e9
    result["matmul square"] = max(square)
    result["matmul lstm"] = max(lstm_shape)
    return result


def report(results: Dict[str, Dict[str, float]], *, command: str, threads: int,
           n_sentences: int, n_tokens: int) -> str:
    """The results as markdown, with the command and the machine."""
    lines = [
        "# `spacy-elmo` biLM inference throughput (exact fp32 path)",
        "",
        f"- command: `{command}`",
        f"- date: {datetime.date.today().isoformat()}; CPU: {cpu_model()}; "
        f"torch {torch.__version__}; {threads} thread(s); "
        f"OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY', '')}",
        f"- input: {n_sentences} sentences, {n_tokens} tokens, one batch, random weights",
        "",
        "| size | params | tok/s no cache | tok/s cache cold | tok/s cache warm "
        "| vs AllenNLP (no cache / warm) | GFLOP/s no cache / warm "
        "| matmul GFLOP/s 1024² / LSTM shape | of matmul (no cache / warm) |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, r in results.items():
        peer = ALLENNLP_TOKENS_PER_S.get(name)
        versus = (f"{r['no cache'] / peer:.1f}x / {r['cache warm'] / peer:.1f}x"
                  if peer else "-")
        lines.append(
            f"| {name} | {r['params'] / 1e6:.1f}M | {r['no cache']:,.0f} | "
            f"{r['cache cold']:,.0f} | {r['cache warm']:,.0f} | {versus} | "
            f"{r['gflops no cache']:.0f} / {r['gflops cache warm']:.0f} | "
            f"{r['matmul square']:.0f} / {r['matmul lstm']:.0f} | "
            f"{r['gflops no cache'] / r['matmul square']:.0%} / "
            f"{r['gflops cache warm'] / r['matmul square']:.0%} |")
    return "\n".join(lines) + "\n"


def main(argv: Optional[Sequence[str]] = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny model, 4 sentences, 1 run")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--sizes", nargs="+", default=["small", "medium", "original"])
    parser.add_argument("--output", type=Path, help="also write the markdown table here")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    sizes, n_sentences, repeats = args.sizes, 32, args.repeats
    if args.quick:
        sizes, n_sentences, repeats = ["tiny"], 4, 1
    sentences = make_sentences(n_sentences)
    results = {name: bench_size(name, sentences, repeats) for name in sizes}
    command = "python benchmarks/bench_embed.py " + " ".join(
        sys.argv[1:] if argv is None else argv)
    text = report(results, command=command.strip(), threads=args.threads,
                  n_sentences=n_sentences, n_tokens=sum(len(s) for s in sentences))
    print(text)
    if args.output:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        write_text(args.output, text)
    return text


if __name__ == "__main__":
    main()
