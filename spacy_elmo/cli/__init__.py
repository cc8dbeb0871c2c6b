"""The `spacy-elmo` console command (also `python -m spacy_elmo`)."""

from __future__ import annotations

import os

# torch's OpenMP threads spin while waiting by default; on shared or busy machines each small
# op then waits for a descheduled thread (measured here: 45.9 s vs 3.3 s for one embed run).
# Must be set before torch starts; a value the user set wins.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

# Each command module registers its commands on `app` (defined in .common, which the
# commands import: they never import this package's namespace, so there is no cycle).
from . import embed, export, info, perplexity, pretrain, serve, widen  # noqa: E402,F401
from .common import FORMAT_HELP, OPTIONS_HELP, WEIGHTS_HELP, app, fail  # noqa: E402

__all__ = ["app", "main", "fail", "WEIGHTS_HELP", "OPTIONS_HELP", "FORMAT_HELP"]


def main() -> None:
    app()
