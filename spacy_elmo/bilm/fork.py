"""Forked children run torch with one intra-op thread.

GNU OpenMP (torch's CPU thread pool on Linux) does not survive a fork: once a process has run
a parallel op, a child forked from it hangs on its first parallel op with two or more threads
(`nlp.pipe(n_process=2)`, a preloading web server's workers, `multiprocessing` on Linux).
With one thread a child runs no parallel region, so it works; give a child more threads only
by starting it fresh (the "spawn" or "forkserver" start methods).
"""

from __future__ import annotations

import os

import torch


def _one_thread_in_child() -> None:
    if torch.get_num_threads() > 1:
        torch.set_num_threads(1)


if hasattr(os, "register_at_fork"):  # POSIX
    os.register_at_fork(after_in_child=_one_thread_in_child)
