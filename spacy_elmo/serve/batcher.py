"""Dynamic batching: one worker thread runs the model for every request, in batches.

A request becomes a job (a kind, such as "embed", a payload and a cost in tokens) whose
`concurrent.futures.Future` the event loop awaits. The worker takes the first job waiting,
then, for up to `max_wait_s`, more jobs of the same kind until the batch would pass
`max_cost`; it hands the batch's payloads to `run`, which returns one outcome per payload (a
result, or an exception for that job alone). The cost a request gives is an estimate (texts
are not tokenized yet); the worker measures each job with `measure` before it joins a batch
(tokenizing its texts), so a batch never holds more than `max_cost` real tokens, and a job
whose measuring fails (too many tokens) gets that error alone. Jobs that arrive while a
batch runs wait, so under load batches fill up without any wait. A job whose client left
before it started is cancelled and skipped. When a whole batch fails, each of its jobs runs
again on its own, so that only the one that fails alone gets the error.

Stopping (`begin_stop`): jobs keep being taken and run for `grace_s` seconds (the server
accepts no new connections then, so these are the requests already in flight); after that,
jobs waiting or new are refused with E216. A running batch always finishes.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Union

from ..errors import Errors, Warnings, first_line
from .inputs import ClientError

Runner = Callable[[str, List[Any]], List[Any]]
Measure = Callable[[str, Any], int]
log = logging.getLogger("uvicorn.error")


@dataclass
class Job:
    kind: str
    payload: Any
    cost: int
    future: Future = field(default_factory=Future)
    measured: bool = False


class _Signal:
    """Queue items that are not jobs: WAKE ends a wait for more jobs, STOP the worker."""

    def __init__(self, name: str) -> None:
        self.name = name


WAKE = _Signal("wake")
STOP = _Signal("stop")
Item = Union[Job, _Signal]


class Batcher:
    def __init__(self, run: Runner, *, max_wait_s: float = 0.005, max_cost: int = 8192,
                 enabled: bool = True, max_queue: int = 1024,
                 setup: Optional[Callable[[], None]] = None,
                 measure: Optional[Measure] = None) -> None:
        self._run = run
        self._measure = measure
        # shown each batch before it runs (the metrics)
        self.on_batch: Optional[Callable[[List[Job]], None]] = None
        self.max_wait_s = max_wait_s
        self.max_cost = max_cost
        self.enabled = enabled
        self.max_queue = max_queue
        self._setup = setup
        self._queue: queue.Queue[Item] = queue.Queue()
        self._held: Optional[Item] = None  # taken from the queue for the next batch
        self._lock = threading.Lock()
        self._stopping = False
        self._deadline = float("inf")
        self._thread: Optional[threading.Thread] = None
        self.failure: Optional[BaseException] = None  # what ended the worker, if anything
        self.stats: Dict[str, int] = {"requests": 0, "batches": 0, "largest_batch": 0,
                                      "largest_batch_tokens": 0, "refused": 0, "cancelled": 0,
                                      "failed_batches": 0}

    # the event loop's side ------------------------------------------------------------
    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="spacy-elmo-model",
                                        daemon=True)
        self._thread.start()

    @property
    def stopping(self) -> bool:
        return self._stopping

    def waiting(self) -> int:
        """Jobs waiting for the worker (the queue, and the one held for the next batch)."""
        return self._queue.qsize() + (self._held is not None)

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def submit(self, kind: str, payload: Any, cost: int) -> Future:
        """Queue a job (it runs once the worker has started); its future is refused at once
        (E216, E209) while stopping, when the worker is gone, or when `max_queue` jobs are
        waiting."""
        job = Job(kind, payload, cost)
        with self._lock:
            if self.failure is not None:
                job.future.set_exception(ClientError(
                    Errors.E275.format(err=first_line(self.failure)), 503))
            elif self._past_grace() or (self._thread is not None and not self.alive):
                job.future.set_exception(ClientError(Errors.E216, 503))
            elif self._queue.qsize() >= self.max_queue:
                job.future.set_exception(ClientError(Errors.E209.format(n=self.max_queue),
                                                     503))
            else:
                self._queue.put(job)
        return job.future

    def begin_stop(self, grace_s: float) -> None:
        """Run the jobs that come within `grace_s` seconds, refuse later ones (a second
        call may only shorten the grace period)."""
        with self._lock:
            self._stopping = True
            self._deadline = min(self._deadline, time.monotonic() + grace_s)
        self._queue.put(WAKE)

    def _past_grace(self) -> bool:
        return self._stopping and time.monotonic() >= self._deadline

    def close(self, timeout: Optional[float] = None) -> None:
        """Stop (refusing whatever still waits) and wait for the worker to end."""
        self.begin_stop(0.0)
        self._queue.put(STOP)
        if self._thread is not None:
            self._thread.join(timeout)

    # the worker's side ----------------------------------------------------------------
    def _loop(self) -> None:
        try:
            if self._setup is not None:
                self._setup()
        except Exception as err:  # noqa: BLE001 (reported to every request, and logged)
            with self._lock:  # submit() checks and queues under it: no job slips past
                self.failure = err
            log.error("The model thread could not start: %s", first_line(err))
            self._refuse_waiting(err)
            return
        while True:
            item = self._next()
            if item is STOP:
                break
            if isinstance(item, Job) and self._prepare(item) and self._start(item):
                batch = self._collect(item)
                try:
                    self._run_batch(batch)
                except Exception as err:  # noqa: BLE001 (the worker outlives any batch)
                    for job in batch:
                        if not job.future.done():
                            job.future.set_exception(err)
        self._refuse_waiting(None)  # after STOP: nothing is left unanswered

    def _refuse_waiting(self, failure: Optional[BaseException]) -> None:
        """Refuse every job in the queue: E216 (stopping), or E275 for `failure`."""
        while not self._queue.empty():
            item = self._queue.get_nowait()
            if not isinstance(item, Job):
                continue
            if failure is None:
                self._refuse(item)
            elif item.future.set_running_or_notify_cancel():
                item.future.set_exception(ClientError(
                    Errors.E275.format(err=first_line(failure)), 503))

    def _next(self, timeout: Optional[float] = None) -> Item:
        """The held item, else the next from the queue (blocking up to `timeout`;
        raises queue.Empty)."""
        if self._held is not None:
            item, self._held = self._held, None
            return item
        if timeout is None:
            return self._queue.get()
        if timeout <= 0 or self._stopping:
            return self._queue.get_nowait()
        return self._queue.get(timeout=timeout)

    def _prepare(self, job: Job) -> bool:
        """Whether `job` may run: not when it waited past the stop's grace period (refused),
        when its client left (cancelled), or when measuring it fails (its error); its cost
        is then measured (once)."""
        if self._past_grace():
            self._refuse(job)
            return False
        if job.future.cancelled():
            self.stats["cancelled"] += 1
            return False
        if self._measure is not None and not job.measured:
            try:
                job.cost = self._measure(job.kind, job.payload)
            except Exception as err:  # noqa: BLE001 (this job's own error, e.g. E203)
                if job.future.set_running_or_notify_cancel():
                    job.future.set_exception(err)
                return False
            job.measured = True
        return True

    def _start(self, job: Job) -> bool:
        """Mark `job` running; False when its client left meanwhile (cancelled)."""
        if not job.future.set_running_or_notify_cancel():
            self.stats["cancelled"] += 1
            return False
        return True

    def _refuse(self, job: Job) -> None:
        if job.future.set_running_or_notify_cancel():
            job.future.set_exception(ClientError(Errors.E216, 503))
            self.stats["refused"] += 1

    def _collect(self, first: Job) -> List[Job]:
        """`first` and the jobs of its kind that come within max_wait_s, up to max_cost."""
        batch, cost = [first], first.cost
        if not self.enabled:
            return batch
        deadline = time.monotonic() + self.max_wait_s
        while cost < self.max_cost:
            try:
                item = self._next(deadline - time.monotonic())
            except queue.Empty:
                break
            if item is WAKE:
                continue
            if not isinstance(item, Job) or item.kind != first.kind:
                self._held = item
                break
            if not self._prepare(item):
                continue
            if cost + item.cost > self.max_cost:
                self._held = item  # measured: it starts the next batch
                break
            if self._start(item):
                batch.append(item)
                cost += item.cost
        return batch

    def _run_batch(self, batch: List[Job]) -> None:
        self.stats["requests"] += len(batch)
        self.stats["batches"] += 1
        self.stats["largest_batch"] = max(self.stats["largest_batch"], len(batch))
        tokens = sum(job.cost for job in batch)
        self.stats["largest_batch_tokens"] = max(self.stats["largest_batch_tokens"], tokens)
        if self.on_batch is not None:
            self.on_batch(batch)
        kind = batch[0].kind
        try:
            outcomes = self._run(kind, [job.payload for job in batch])
        except Exception as err:  # noqa: BLE001 (reported to each job, or retried alone)
            if len(batch) == 1:
                outcomes = [err]
            else:
                self.stats["failed_batches"] += 1
                log.warning(Warnings.W032.format(n=len(batch), err=first_line(err)))
                outcomes = [self._alone(kind, job.payload) for job in batch]
        for job, outcome in zip(batch, outcomes, strict=True):
            if isinstance(outcome, BaseException):
                job.future.set_exception(outcome)
            else:
                job.future.set_result(outcome)

    def _alone(self, kind: str, payload: Any) -> Any:
        try:
            return self._run(kind, [payload])[0]
        except Exception as err:  # noqa: BLE001 (this job's own failure)
            return err
