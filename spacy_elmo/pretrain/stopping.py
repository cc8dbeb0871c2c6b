"""Stopping a pretraining run on SIGINT (Ctrl-C) or SIGTERM, promptly and cleanly.

While the training loop runs, the first signal asks for a stop: the loop checks the request
after each step, and the long loops inside a step (reading text, filling the shuffle buffer
and the rows, dev evaluation) check it at each turn through `stop_point`, which raises
`StopRequested` where the run's state is consistent (no step half-taken: what was read ahead
stays in the checkpoint's buffers, so a resumed run trains on exactly what it would have).
The loop then writes a checkpoint and ends. A second signal aborts at once (`Aborted`):
a checkpoint being written is dropped, the one on disk stays as it was. Under torchrun the
ranks stop together after a step only (a rank leaving a step alone would block the others).
"""

from __future__ import annotations

import signal
from typing import Any, Dict, Optional

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class StopRequested(Exception):
    """Raised by `stop_point` when a stop was asked for: leave the step, then checkpoint."""


class Aborted(BaseException):
    """A second stop signal: the run ends at once, writing nothing more."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


_ACTIVE: Optional[StopSignal] = None


def stop_point() -> None:
    """Raise StopRequested when a stop was asked for inside an interruptible run (a no-op
    otherwise: outside a run, or under torchrun)."""
    if _ACTIVE is not None and _ACTIVE.requested and _ACTIVE.interruptible:
        raise StopRequested


class StopSignal:
    """Turns SIGINT/SIGTERM into a stop request while the block runs (main thread only; a
    no-op elsewhere): `requested` and `signum` after the first, `Aborted` from the second.
    `interruptible`: whether `stop_point` may leave a step (False under torchrun)."""

    def __init__(self, *, interruptible: bool = True) -> None:
        self.requested = False
        self.signum: Optional[int] = None
        self.interruptible = interruptible
        self._previous: Dict[int, Any] = {}

    def __enter__(self) -> StopSignal:
        global _ACTIVE
        try:
            for sig in STOP_SIGNALS:
                self._previous[sig] = signal.signal(sig, self._handle)
        except ValueError:  # not the main thread: no handlers
            return self
        _ACTIVE = self
        return self

    def _handle(self, signum: int, frame: Any) -> None:
        if self.requested:
            raise Aborted(signum)
        self.requested = True
        self.signum = signum

    def __exit__(self, *exc: Any) -> None:
        global _ACTIVE
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        if _ACTIVE is self:
            _ACTIVE = None
