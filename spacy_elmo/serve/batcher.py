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

Long requests run in steps: `run` may answer a job with CONTINUE (it ran one step, of
about `step_tokens`; `measure` gives the next step's cost and what is left), and the job
waits among the ongoing ones, which join each batch after the new requests, in turn, while
the steps of long jobs take at most as many tokens as the short jobs in the batch (at least
`step_tokens`). So a request of thousands of tokens shares
the model with the short ones that arrive meanwhile instead of holding it for seconds, and a
short request waits for about one batch, not for the long ones before it.

Stopping (`begin_stop`): jobs keep being taken and run for `grace_s` seconds (the server
accepts no new connections then, so these are the requests already in flight); after that,
jobs waiting or new are refused with E216. A running batch always finishes.
"""

from __future__ import annotations

import collections
import logging
import queue
import threading
import time
from concurrent.futures import CancelledError, Future
from dataclasses import dataclass, field
from typing import Any, Callable, Deque, Dict, List, Optional, Tuple, Union

from ..errors import Errors, Warnings, first_line
from .inputs import ClientError

Runner = Callable[[str, List[Any]], List[Any]]
# (kind, payload, step_tokens) -> a job's next step's cost, of about step_tokens, and the
# cost of all its steps left (the same for a job of one step)
Measure = Callable[[str, Any, int], Tuple[int, int]]
log = logging.getLogger("uvicorn.error")


class JobFuture(Future):
    """A job's future, which remembers being cancelled even while the job runs (a running
    future cannot be cancelled): the client left, so its remaining steps are dropped."""

    abandoned = False

    def cancel(self) -> bool:
        self.abandoned = True
        return super().cancel()


@dataclass
class Job:
    kind: str
    payload: Any
    cost: int  # of its next step, once measured
    future: JobFuture = field(default_factory=JobFuture)
    measured: bool = False
    steps: int = 0  # run so far: a job with steps is running (its future too)
    long: bool = False  # needs more than one step

    @property
    def short(self) -> bool:
        """A job that ends in one step, from its first."""
        return not self.steps and not self.long

    def claim(self) -> bool:
        """Whether the worker may give this job an outcome: it runs already (since its first
        step), or it starts now; False when its client left before it started."""
        return bool(self.steps) or self.future.set_running_or_notify_cancel()


class _Signal:
    """Queue items that are not jobs: WAKE ends a wait for more jobs, STOP the worker."""

    def __init__(self, name: str) -> None:
        self.name = name


WAKE = _Signal("wake")
STOP = _Signal("stop")
CONTINUE = _Signal("continue")  # a job's outcome: it ran a step and has more to run
Item = Union[Job, _Signal]


class Batcher:
    def __init__(self, run: Runner, *, max_wait_s: float = 0.005, max_cost: int = 8192,
                 enabled: bool = True, max_queue: int = 1024,
                 setup: Optional[Callable[[], None]] = None,
                 measure: Optional[Measure] = None, step_tokens: int = 512) -> None:
        self._run = run
        self.step_tokens = step_tokens
        self._ongoing: Deque[Job] = collections.deque()  # jobs between steps (the worker's)
        self._turn = False  # without batching: ongoing and new jobs take turns
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
        """Jobs waiting for the worker: the queue, the one held for the next batch, and those
        between steps."""
        return self._queue.qsize() + (self._held is not None) + len(self._ongoing)

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
            elif self._queue.qsize() + len(self._ongoing) >= self.max_queue:
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
            item, its_turn = self._next_item()
            if item is STOP:
                break
            if not isinstance(item, Job) or not self._prepare(item):
                continue
            if item.long and not its_turn and self.enabled:
                self._ongoing.append(item)  # runs in steps, in turn with the others
                continue
            if self._start(item):
                batch = self._collect(item)
                try:
                    self._run_batch(batch)
                except Exception as err:  # noqa: BLE001 (the worker outlives any batch)
                    for job in batch:
                        if not job.future.done():
                            job.future.set_exception(err)
        self._refuse_waiting(None)  # after STOP: nothing is left unanswered

    def _refuse_waiting(self, failure: Optional[BaseException]) -> None:
        """Refuse every job in the queue or between steps: E216 (stopping), or E275 for
        `failure`."""
        waiting: List[Job] = list(self._ongoing)
        self._ongoing.clear()
        while not self._queue.empty():
            item = self._queue.get_nowait()
            if isinstance(item, Job):
                waiting.append(item)
        for job in waiting:
            if failure is None:
                self._refuse(job)
            elif job.claim():
                job.future.set_exception(ClientError(
                    Errors.E275.format(err=first_line(failure)), 503))

    def _next_item(self) -> Tuple[Item, bool]:
        """The next job to start a batch with, and whether it is a long job's turn: a long
        one when no new one waits (or, without batching, every other time), else the next
        item of the queue."""
        if self._ongoing and self._held is None:
            self._turn = not self._turn
            if self._queue.empty() or (not self.enabled and self._turn):
                return self._ongoing.popleft(), True
        return self._next(), False

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
        if job.future.cancelled() or job.future.abandoned:
            self.stats["cancelled"] += 1
            if job.steps and not job.future.done():  # running: ended here, its work dropped
                job.future.set_exception(CancelledError())
            return False
        if self._measure is not None and not job.measured:
            try:
                job.cost, rest = self._measure(job.kind, job.payload, self.step_tokens)
                job.long = job.long or rest > job.cost
            except Exception as err:  # noqa: BLE001 (this job's own error, e.g. E203)
                if job.claim():
                    job.future.set_exception(err)
                return False
            job.measured = True
        return True

    def _start(self, job: Job) -> bool:
        """Mark `job` running; False when its client left meanwhile (cancelled)."""
        if not job.claim():
            self.stats["cancelled"] += 1
            return False
        return True

    def _refuse(self, job: Job) -> None:
        if job.claim():
            job.future.set_exception(ClientError(Errors.E216, 503))
            self.stats["refused"] += 1

    def _collect(self, first: Job) -> List[Job]:
        """`first` and the new jobs of its kind that come within max_wait_s, up to max_cost;
        then ongoing jobs of its kind, in turn, while the steps of long jobs (new or
        ongoing) take at most as many tokens as the short jobs (at least step_tokens)."""
        batch, cost = [first], first.cost
        if not self.enabled:
            return batch
        if not first.steps:
            cost = self._collect_new(first, batch)
        short = sum(job.cost for job in batch if job.short)
        share, ongoing = max(short, self.step_tokens), cost - short
        for _ in range(len(self._ongoing)):
            job = self._ongoing[0]
            if job.kind != first.kind:
                self._ongoing.rotate(-1)
                continue
            if not self._prepare(job):  # refused past the grace period, or failed
                self._ongoing.popleft()
                continue
            if ongoing + job.cost > share or cost + job.cost > self.max_cost:
                break
            self._ongoing.popleft()
            if self._start(job):
                batch.append(job)
                ongoing += job.cost
                cost += job.cost
        return batch

    def _collect_new(self, first: Job, batch: List[Job]) -> int:
        """Add to `batch` the new jobs of `first`'s kind that come within max_wait_s, up to
        max_cost; their cost with `first`'s."""
        cost = first.cost
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
            if item.long and not item.steps:
                self._ongoing.append(item)  # its steps join in turn, after the short jobs
                continue
            if cost + item.cost > self.max_cost:
                self._held = item  # measured: it starts the next batch
                break
            if self._start(item):
                batch.append(item)
                cost += item.cost
        return cost

    def _run_batch(self, batch: List[Job]) -> None:
        self.stats["requests"] += sum(not job.steps for job in batch)
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
            if outcome is CONTINUE:
                job.steps += 1
                job.measured = False  # its next step's cost
                self._ongoing.append(job)
            elif isinstance(outcome, BaseException):
                job.future.set_exception(outcome)
            else:
                job.future.set_result(outcome)

    def _alone(self, kind: str, payload: Any) -> Any:
        try:
            return self._run(kind, [payload])[0]
        except Exception as err:  # noqa: BLE001 (this job's own failure)
            return err
