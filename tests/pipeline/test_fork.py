"""Forked children after the parent ran the biLM on torch's thread pool
(spacy_elmo/bilm/fork.py), and nothing process-wide changed by importing the package.

Without the fork handler, a child's first parallel op hangs (GNU OpenMP does not survive a
fork once its pool has run); these tests time out instead of hanging."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

from spacy_elmo.bilm import batch_to_ids

from ..conftest import in_forked_child, make_random_bilm


@pytest.fixture
def two_threads():
    """The biLM has run on two threads (so the fork handler is registered), and the pool
    has run."""
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    with torch.inference_mode():
        make_random_bilm()(batch_to_ids([["a", "pool", "of", "threads"]]))
    a = torch.randn(512, 512)
    for _ in range(5):
        a @ a
    yield
    torch.set_num_threads(before)


def _matmuls():
    a = torch.randn(512, 512)
    for _ in range(5):
        a @ a
    return torch.get_num_threads()


def test_a_forked_child_runs_torch_with_one_thread(two_threads):
    assert in_forked_child(_matmuls, 30, "torch's thread pool") == 1
    assert torch.get_num_threads() == 2  # the parent keeps its own


def test_nlp_pipe_with_processes_after_the_parent_used_two_threads(nlp_elmo, two_threads):
    texts = ["A first sentence here .", "And another one", "Short", "The last text ."] * 2
    single = [doc._.elmo for doc in nlp_elmo.pipe(texts, batch_size=2)]  # 2 threads
    multi = in_forked_child(  # nlp.pipe forks its own workers
        lambda: [doc._.elmo for doc in nlp_elmo.pipe(texts, batch_size=2, n_process=2)],
        60, "nlp.pipe(n_process=2) after the parent used two threads")
    assert len(multi) == len(single)
    for a, b in zip(single, multi, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


FRESH = """
import json, os, signal, sys, threading, warnings
import spacy, thinc.api, torch  # their own import-time settings are theirs
torch.set_num_threads(2)

def state():
    return {"threads": threading.active_count(), "torch_threads": torch.get_num_threads(),
            "env": dict(os.environ), "filters": len(warnings.filters),
            "formatwarning": warnings.formatwarning.__module__,
            "signals": [str(signal.getsignal(s)) for s in (signal.SIGINT, signal.SIGTERM)],
            "engine": torch.backends.quantized.engine}

def child_threads():
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.write(write, str(torch.get_num_threads()).encode())
        os._exit(0)
    os.waitpid(pid, 0)
    return int(os.read(read, 16))

before = state()
import spacy, spacy_elmo, spacy_elmo.bilm, spacy_elmo.pipeline
from spacy_elmo.bilm import BiLM, batch_to_ids, preset
spacy.blank("en")
after_import = state()
forked_after_import = child_threads()
torch.manual_seed(0)
with torch.inference_mode():
    BiLM(preset("tiny")).eval()(batch_to_ids([["two", "threads"]]))
print(json.dumps({"same": before == after_import, "before": before, "after": after_import,
                  "after_import": forked_after_import, "after_run": child_threads()}))
"""


@pytest.mark.parametrize("switch", [None, "0"])
def test_importing_changes_nothing_process_wide_and_running_registers_the_fork_guard(switch):
    """Issue 36: importing the package (and the component through spaCy's entry points)
    leaves threads, the environment, warning filters and format, signal handlers, torch's
    settings and forks as spaCy, thinc and torch left them; the
    first run on two threads registers the fork handler, unless SPACY_ELMO_FORK_GUARD=0."""
    env = {k: v for k, v in os.environ.items() if k != "SPACY_ELMO_FORK_GUARD"}
    if switch is not None:
        env["SPACY_ELMO_FORK_GUARD"] = switch
    run = subprocess.run([sys.executable, "-c", FRESH], capture_output=True, text=True,
                         env=env, timeout=300, check=False)
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout.strip().splitlines()[-1])
    assert result["same"], (result["before"], result["after"])
    assert result["after_import"] == 2
    assert result["after_run"] == (2 if switch == "0" else 1)
