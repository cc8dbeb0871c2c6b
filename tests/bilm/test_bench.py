"""The benchmark script runs (a smoke run: no timings are asserted)."""

import importlib.util
import sys
from pathlib import Path

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


def test_half_precision_benchmark_runs_on_cpu():
    spec = importlib.util.spec_from_file_location("bench_half", BENCH.parent / "bench_half.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    text = bench.main(["--device", "cpu", "--shapes", "tiny", "--sentences", "8"])
    row = next(line for line in text.splitlines() if line.startswith("| tiny | bf16 |"))
    cosines = [float(cell.split("/")[1]) for cell in row.split("|")[-2].split(";")]
    assert len(cosines) == 3 and min(cosines) > 0.99  # close to fp32, every layer
