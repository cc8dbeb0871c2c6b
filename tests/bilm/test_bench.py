"""The benchmark script runs (a smoke run: no timings are asserted)."""

import importlib.util
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_embed.py"


def test_quick_benchmark_runs(tmp_path):
    spec = importlib.util.spec_from_file_location("bench_embed", BENCH)
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    out = tmp_path / "embed.md"
    text = bench.main(["--quick", "--threads", "1", "--output", str(out)])
    assert out.read_text(encoding="utf-8") == text
    assert "| tiny |" in text and "--quick" in text
    assert len(bench.make_sentences(32)) == 32
    assert all(10 <= len(s) <= 30 for s in bench.make_sentences(32))


def test_pretrain_benchmark_runs_every_path(tmp_path):
    spec = importlib.util.spec_from_file_location(
        "bench_pretrain", BENCH.parent / "bench_pretrain.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    sys.modules["bench_pretrain"] = bench  # dataclasses look their module up
    spec.loader.exec_module(bench)
    out = tmp_path / "pretrain.md"
    text = bench.main(["--shapes", "tiny", "--threads", "1", "--rows", "4,8", "--window", "5",
                       "--vocab", "300", "--negatives", "32", "--repeats", "1",
                       "--paths", "reference,fast,fast-directions", "--out", str(out)])
    assert out.read_text(encoding="utf-8") == text
    assert "| tiny | reference" in text and "| tiny | fast (" in text
    assert "| tiny | fast + directions on two threads" in text
    assert "4x5" in text and "8x5" in text and "| LSTM |" in text


def test_shard_benchmark_runs_and_compares_outputs(tmp_path):
    spec = importlib.util.spec_from_file_location(
        "bench_embed_shards", BENCH.parent / "bench_embed_shards.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    out = tmp_path / "shards.md"
    text = bench.main(["--lines", "6", "--shapes", "small", "--repeats", "1",
                       "--output", str(out)])
    assert out.read_text(encoding="utf-8") == text
    row = next(line for line in text.splitlines() if line.startswith("| small |"))
    difference = row.rstrip(" |").split("|")[-1].split("/")
    assert all(float(d) < 1e-4 for d in difference)  # the same vectors, every way


@pytest.mark.filterwarnings("ignore:.*W010")
def test_precision_benchmark_reports_every_precision_and_engine(monkeypatch):
    """bf16 forced where this CPU emulates it: close to fp32 in every layer, as int8."""
    import torch

    from spacy_elmo.bilm.hardware import ALLOW_EMULATED_BF16

    spec = importlib.util.spec_from_file_location("bench_precision",
                                                  BENCH.parent / "bench_precision.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    monkeypatch.setenv(ALLOW_EMULATED_BF16, "1")  # (what --force-bf16 sets) unset afterwards
    threads = torch.get_num_threads()
    try:
        text = bench.main(["--quick", "--force-bf16", "--sections", "error,engines"])
    finally:
        torch.set_num_threads(threads)
    for precision in ("bf16", "int8"):
        row = next(line for line in text.splitlines()
                   if line.startswith(f"| small | {precision} |"))
        cells = [cell.split(" / ") for cell in row.split("|")[3:-1]]
        assert len(cells) == 3 and all(len(c) == 5 for c in cells)  # max, mean, min, p1, median
        assert min(float(c[2]) for c in cells) > 0.99  # the worst token of every layer
    assert "ISA:" in text and "quantized engine" in text and "| small | 1 |" in text
