"""Sharded `embed` against one process, side by side in one run: wall-clock lines/s of
`spacy-elmo embed` as one process with 1 thread, one process with 2 threads, and 2 processes
(`--shard 0/2`, `--shard 1/2`, 1 thread each) started together, and whether the sharded
output (the index file) holds the same vectors as the single-process file.

Every run is a fresh `python -m spacy_elmo embed` process, so the times include starting
Python, torch and the model (as a user's runs do); `--lines` sets how much they amortize.
Text: the AllenNLP fixture's 30 news sentences, repeated. Weights: the bundled English biLM
(`small`) and the published original shape with random weights (`original`).

    python benchmarks/bench_embed_shards.py [--lines 3000] [--shapes small,original]
        [--output benchmarks/results/embed_shards.md]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import h5py
import numpy as np
import torch

from spacy_elmo.bilm import BiLM, preset, save_bilm
from spacy_elmo.bilm.hardware import cpu_flags, cpu_model
from spacy_elmo.files.atomic import write_text

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "allennlp_elmo" / "sentences.json"


def write_input(path: Path, lines: int) -> int:
    """`lines` fixture sentences into `path`; returns their token count."""
    sentences = [s for group in json.loads(FIXTURE.read_text(encoding="utf-8"))
                 for s in group]
    chosen = [sentences[i % len(sentences)] for i in range(lines)]
    path.write_text("\n".join(chosen) + "\n", encoding="utf-8")
    return sum(len(s.split()) for s in chosen)


def embed(input_path: Path, output: Path, weights: Optional[Path], threads: int,
          shard: Optional[str] = None) -> subprocess.Popen:
    command = [sys.executable, "-m", "spacy_elmo", "embed", str(input_path), str(output),
               "--threads", str(threads), "--overwrite"]
    if weights is not None:
        command += ["--weights", str(weights)]
    if shard is not None:
        command += ["--shard", shard]
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), OMP_WAIT_POLICY="PASSIVE")
    return subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)


def wait_all(processes: List[subprocess.Popen]) -> None:
    for process in processes:
        _, err = process.communicate()
        if process.returncode != 0:
            raise SystemExit(f"embed failed ({process.args!r}):\n{err}")


def timed(start: List[subprocess.Popen]) -> float:
    began = time.perf_counter()
    wait_all(start)
    return time.perf_counter() - began


def max_difference(a: Path, b: Path) -> float:
    """The largest |a - b| over every line's dataset (inf if the names differ)."""
    with h5py.File(a, "r") as fa, h5py.File(b, "r") as fb:
        names = {k for k in fa if k != "sentence_to_index"}
        if names != {k for k in fb if k != "sentence_to_index"}:
            return float("inf")
        worst = 0.0
        for name in names:
            x, y = np.asarray(fa[name]), np.asarray(fb[name])
            if x.shape != y.shape:
                return float("inf")
            if x.size:
                worst = max(worst, float(np.abs(x - y).max()))
        return worst


def run_shape(shape: str, weights: Optional[Path], input_path: Path, scratch: Path,
              repeats: int) -> Dict[str, float]:
    """Best wall-clock seconds of each way, and the sharded output's difference."""
    one = scratch / f"{shape}-one.hdf5"
    two = scratch / f"{shape}-two-threads.hdf5"
    sharded = scratch / f"{shape}-sharded.hdf5"
    times: Dict[str, List[float]] = {"one": [], "two threads": [], "sharded": []}
    for _ in range(repeats):  # round-robin: the ways see the same machine
        times["one"].append(timed([embed(input_path, one, weights, 1)]))
        times["two threads"].append(timed([embed(input_path, two, weights, 2)]))
        for old in scratch.glob(f"{sharded.name}.shard-*"):
            old.unlink()
        times["sharded"].append(timed([embed(input_path, sharded, weights, 1, f"{i}/2")
                                       for i in range(2)]))
    best = {way: min(values) for way, values in times.items()}
    best["difference"] = max_difference(one, sharded)
    best["difference two threads"] = max_difference(one, two)
    return best


def main(argv: Optional[Sequence[str]] = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=3000)
    parser.add_argument("--shapes", default="small,original")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--output", type=Path, help="also write the markdown here")
    args = parser.parse_args(argv)
    if args.lines < 2 or args.repeats < 1:
        parser.error("--lines must be >= 2 and --repeats >= 1")
    scratch = Path(tempfile.mkdtemp(prefix="bench-shards-"))
    input_path = scratch / "input.txt"
    n_tokens = write_input(input_path, args.lines)
    flags = sorted(f for f in cpu_flags() if f.startswith(("avx", "amx", "fma", "vnni")))
    lines = [f"# Sharded embed against one process ({datetime.date.today()})", "",
             "- command: `python benchmarks/bench_embed_shards.py "
             f"{' '.join(argv if argv is not None else sys.argv[1:])}`",
             f"- CPU: {cpu_model()}, {os.cpu_count()} cores; flags: {' '.join(flags)}",
             f"- torch {torch.__version__}; {args.lines} lines, {n_tokens:,} tokens; best of "
             f"{args.repeats} round-robin repeats; wall-clock of whole processes", "",
             "| shape | 1 process, 1 thread | 1 process, 2 threads | 2 shards, 1 thread each "
             "| 2 shards : 1 process 1 thread | 2 threads : 1 thread | max abs difference "
             "(sharded / 2 threads vs 1 process) |", "|---|---|---|---|---|---|---|"]
    for shape in args.shapes.split(","):
        weights: Optional[Path] = None  # the bundled biLM
        if shape == "original":
            torch.manual_seed(0)
            weights = scratch / "original"
            save_bilm(BiLM(preset("original")).eval(), weights)
        elif shape != "small":
            parser.error(f"unknown shape {shape!r}: small or original")
        best = run_shape(shape, weights, input_path, scratch, args.repeats)
        rate = {way: args.lines / best[way] for way in ("one", "two threads", "sharded")}
        lines.append(f"| {shape} | {rate['one']:,.1f} lines/s ({best['one']:.1f} s) | "
                     f"{rate['two threads']:,.1f} lines/s ({best['two threads']:.1f} s) | "
                     f"{rate['sharded']:,.1f} lines/s ({best['sharded']:.1f} s) | "
                     f"{rate['sharded'] / rate['one']:.2f}x | "
                     f"{rate['two threads'] / rate['one']:.2f}x | "
                     f"{best['difference']:.2g} / {best['difference two threads']:.2g} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.output:
        write_text(args.output, text)
    return text


if __name__ == "__main__":
    main()
