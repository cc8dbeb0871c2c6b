"""fp16 and bf16 biLM inference against fp32, side by side in one run: error per layer (max
abs / mean cosine over tokens) and tokens/s, under `torch.autocast` (matmuls and convolutions
in half precision, the LSTM cell state and the gates' sums as autocast keeps them).

Meant for a GPU (`benchmarks/gpu_check.sh` runs it); `--device cpu` runs the same code on
the CPU (bf16 only where the CPU has AVX512-BF16 or AMX, fp16 slow). Random weights in the
published shapes; 256 sentences of 10-30 tokens in batches of 64.

    python benchmarks/bench_half.py [--device cuda] [--shapes small,original]
"""

from __future__ import annotations

import argparse
import random
import time
from typing import Dict, List, Optional, Sequence

import torch
import torch.nn.functional as F

from spacy_elmo.bilm import BiLM, batch_to_ids, preset

DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}


def sentences(n: int = 256) -> List[List[str]]:
    rng = random.Random(0)
    words = "the of and to in a is that for it as was with be by on not he this are".split()
    return [[rng.choice(words) + str(rng.randint(0, 999)) for _ in range(rng.randint(10, 30))]
            for _ in range(n)]


def run(bilm: BiLM, batches: List[torch.Tensor], dtype: Optional[torch.dtype]
        ) -> List[torch.Tensor]:
    device = batches[0].device
    with torch.inference_mode(), torch.autocast(device.type, dtype=dtype or torch.float32,
                                                enabled=dtype is not None):
        return [bilm(batch).layers.float() for batch in batches]


def seconds(bilm: BiLM, batches: List[torch.Tensor], dtype: Optional[torch.dtype]) -> float:
    run(bilm, batches[:1], dtype)  # warm-up
    sync = torch.cuda.synchronize if batches[0].is_cuda else (lambda: None)
    sync()
    start = time.perf_counter()
    run(bilm, batches, dtype)
    sync()
    return time.perf_counter() - start


def main(argv: Optional[Sequence[str]] = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--shapes", default="small,original")
    parser.add_argument("--sentences", type=int, default=256)
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    sents = sentences(args.sentences)
    n_tokens = sum(map(len, sents))
    batches = [batch_to_ids(sents[i:i + 64]).to(device) for i in range(0, len(sents), 64)]
    masks = [(b > 0).any(-1) for b in batches]
    lines = [f"device {device}" + (f" ({torch.cuda.get_device_name(device)})"
                                   if device.type == "cuda" else ""),
             "| shape | precision | tokens/s | : fp32 | max abs / mean cosine per layer |",
             "|---|---|---:|---:|---|"]
    for shape in args.shapes.split(","):
        torch.manual_seed(0)
        bilm = BiLM(preset(shape)).eval().to(device)
        ref = run(bilm, batches, None)
        rates: Dict[str, float] = {"fp32": n_tokens / seconds(bilm, batches, None)}
        lines.append(f"| {shape} | fp32 | {rates['fp32']:,.0f} | 1.00x | - |")
        for name, dtype in DTYPES.items():
            out = run(bilm, batches, dtype)
            cells = []
            for k in range(ref[0].shape[0]):
                a = torch.cat([r[k][m] for r, m in zip(ref, masks, strict=True)])
                b = torch.cat([o[k][m] for o, m in zip(out, masks, strict=True)])
                cells.append(f"{(a - b).abs().max().item():.4f} / "
                             f"{F.cosine_similarity(a, b, dim=-1).mean().item():.5f}")
            rates[name] = n_tokens / seconds(bilm, batches, dtype)
            lines.append(f"| {shape} | {name} | {rates[name]:,.0f} | "
                         f"{rates[name] / rates['fp32']:.2f}x | {'; '.join(cells)} |")
    text = "\n".join(lines) + "\n"
    print(text)
    return text


if __name__ == "__main__":
    main()
