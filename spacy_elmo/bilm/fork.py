"""Forked children run torch with one intra-op thread, once this package has run threads.

GNU OpenMP (torch's CPU thread pool on Linux) does not survive a fork: once a process has run
a parallel op, a child forked from it hangs on its first parallel op with two or more threads
(`nlp.pipe(n_process=2)`, a preloading web server's workers, `multiprocessing` on Linux).
With one thread a child runs no parallel region, so it works; give a child more threads only
by starting it fresh (the "spawn" or "forkserver" start methods).

Importing the package changes nothing: the handler is registered the first time the biLM
runs with two or more threads (`guard_forks`, called by the forward pass and the direction
threads). `SPACY_ELMO_FORK_GUARD=0` in the environment leaves forks alone altogether.
"""

from __future__ import annotations

import os

import torch

SWITCH = "SPACY_ELMO_FORK_GUARD"
_registered = False


def _one_thread_in_child() -> None:
    if torch.get_num_threads() > 1:
        torch.set_num_threads(1)


def guard_forks() -> None:
    """Register the at-fork handler (once, on POSIX, unless SPACY_ELMO_FORK_GUARD=0): call
    before this package runs a parallel op."""
    global _registered
    if _registered or not hasattr(os, "register_at_fork"):
        return
    if os.environ.get(SWITCH, "1").strip().lower() in ("0", "false", "no", "off"):
        return
    _registered = True
    os.register_at_fork(after_in_child=_one_thread_in_child)
