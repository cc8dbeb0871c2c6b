"""The benchmark script runs (a smoke run: no timings are asserted)."""

import importlib.util
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
