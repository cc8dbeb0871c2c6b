"""The serving benchmark runs end to end on a tiny biLM (a smoke run: no timings asserted)."""

import importlib.util
import sys
from pathlib import Path

import pytest

pytest.importorskip("fastapi", reason="the serve extra is not installed")
pytest.importorskip("uvicorn", reason="the serve extra is not installed")

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_serve.py"


def test_bench_serve_runs_both_modes_and_checks_exactness(tmp_path):
    spec = importlib.util.spec_from_file_location("bench_serve", BENCH)
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = bench  # its dataclasses look their module up
    spec.loader.exec_module(bench)
    out = tmp_path / "serve.md"
    text = bench.main(["--shape", "tiny", "--clients", "1,2", "--requests", "4", "--threads",
                       "1", "--memory-requests", "20", "--out", str(out)])
    assert out.read_text(encoding="utf-8") == text
    rows = [line for line in text.splitlines() if line.startswith(("| 1 |", "| 2 |"))]
    assert len(rows) == 2
    diff = float(text.split("max |diff| ")[1].split()[0])
    assert diff <= 1e-6
    assert "MB at 20" in text
