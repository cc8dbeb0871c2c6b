"""The tiny models the tests and benchmarks/gpu_check.sh build come from the lab: the GPU
check runs without the test suite on its path."""

import re
import subprocess
import sys
from pathlib import Path

from spacy_elmo_lab.tiny import TINY_OPTIONS, make_random_bilm

from spacy_elmo.bilm import BiLM

ROOT = Path(__file__).resolve().parents[2]


def test_random_bilm_is_reproducible_with_non_trivial_biases():
    a, b = make_random_bilm(seed=3), make_random_bilm(seed=3)
    assert isinstance(a, BiLM) and a.options == TINY_OPTIONS
    for (name, p), q in zip(a.named_parameters(), b.parameters(), strict=True):
        assert (p == q).all(), name
        if name.endswith("bias"):
            assert p.abs().sum() > 0, name


def test_gpu_checks_toy_setup_needs_no_test_module(tmp_path):
    """benchmarks/gpu_check.sh imported tests.conftest (a sys.path edit away from the repo)."""
    script = (ROOT / "benchmarks" / "gpu_check.sh").read_text()
    assert "tests." not in script and "sys.path" not in script
    setup = re.search(r"<<'PY'\n(.*?)\nPY\n", script, re.S)
    assert setup is not None and "toy_docs" in setup.group(1)
    code = ("import sys; sys.modules['tests'] = None; sys.argv = ['-', sys.argv[1]]; "
            f"exec({setup.group(1)!r})")
    subprocess.run([sys.executable, "-c", code, str(tmp_path)], check=True, cwd=tmp_path)
    assert (tmp_path / "bilm" / "weights.hdf5").exists()
    assert (tmp_path / "train.spacy").stat().st_size > 0
