"""The batcher alone (no HTTP): which jobs run together, what runs when, and stopping."""

import threading
import time
from concurrent.futures import CancelledError

import pytest

from spacy_elmo.serve.batcher import CONTINUE, Batcher
from spacy_elmo.serve.inputs import ClientError


class Recorder:
    """A runner that records its batches; `gate` holds the first call until set."""

    def __init__(self, fail_on=None):
        self.batches = []
        self.started = threading.Event()
        self.gate = threading.Event()
        self.fail_on = fail_on

    def __call__(self, kind, payloads):
        self.batches.append((kind, list(payloads)))
        self.started.set()
        self.gate.wait(10)
        if self.fail_on is not None and self.fail_on in payloads:
            raise RuntimeError("boom")
        return [f"{kind}:{p}" for p in payloads]


def started(run, **kwargs):
    batcher = Batcher(run, **kwargs)
    batcher.start()
    return batcher


def test_jobs_that_wait_while_a_batch_runs_go_together():
    run = Recorder()
    batcher = started(run, max_wait_s=0.0)
    first = batcher.submit("embed", "a", 3)
    assert run.started.wait(10)
    rest = [batcher.submit("embed", p, 3) for p in "bcd"]
    run.gate.set()
    assert [f.result(10) for f in [first, *rest]] == ["embed:a", "embed:b", "embed:c",
                                                    "embed:d"]
    batcher.close(10)
    assert run.batches == [("embed", ["a"]), ("embed", ["b", "c", "d"])]
    assert batcher.stats["largest_batch"] == 3 and batcher.stats["requests"] == 4


def test_a_batch_keeps_to_its_cost_and_its_kind():
    run = Recorder()
    batcher = started(run, max_wait_s=0.0, max_cost=10)
    blocker = batcher.submit("embed", "x", 1)
    assert run.started.wait(10)
    futures = [batcher.submit("embed", "a", 4), batcher.submit("embed", "b", 4),
               batcher.submit("embed", "c", 4), batcher.submit("parse", "d", 1),
               batcher.submit("embed", "e", 12)]
    run.gate.set()
    for f in [blocker, *futures]:
        f.result(10)
    batcher.close(10)
    assert run.batches == [("embed", ["x"]), ("embed", ["a", "b"]), ("embed", ["c"]),
                           ("parse", ["d"]), ("embed", ["e"])]


def test_without_batching_every_job_runs_alone():
    run = Recorder()
    batcher = started(run, enabled=False)
    first = batcher.submit("embed", "a", 1)
    assert run.started.wait(10)
    rest = [batcher.submit("embed", p, 1) for p in "bc"]
    run.gate.set()
    for f in [first, *rest]:
        f.result(10)
    batcher.close(10)
    assert [b for _, b in run.batches] == [["a"], ["b"], ["c"]]


def test_a_job_whose_client_left_is_skipped():
    run = Recorder()
    batcher = started(run, max_wait_s=0.0)
    first = batcher.submit("embed", "a", 1)
    assert run.started.wait(10)
    gone, kept = batcher.submit("embed", "gone", 1), batcher.submit("embed", "kept", 1)
    assert gone.cancel()
    run.gate.set()
    assert kept.result(10) == "embed:kept" and first.result(10) == "embed:a"
    batcher.close(10)
    assert all("gone" not in b for _, b in run.batches)
    assert batcher.stats["cancelled"] == 1
    with pytest.raises(CancelledError):
        gone.result()


def test_a_failing_batch_fails_only_the_job_that_fails_alone():
    run = Recorder(fail_on="bad")
    run.gate.set()
    batcher = Batcher(run, max_wait_s=0.0)
    futures = [batcher.submit("embed", p, 1) for p in ("ok1", "bad", "ok2")]  # queued first
    batcher.start()
    assert futures[0].result(10) == "embed:ok1" and futures[2].result(10) == "embed:ok2"
    with pytest.raises(RuntimeError, match="boom"):
        futures[1].result(10)
    batcher.close(10)
    assert run.batches[0] == ("embed", ["ok1", "bad", "ok2"])  # then each alone
    assert batcher.stats["failed_batches"] == 1


def test_after_the_grace_period_waiting_and_new_jobs_are_refused():
    run = Recorder()
    batcher = started(run, max_wait_s=0.0, enabled=False)
    running = batcher.submit("embed", "a", 1)
    assert run.started.wait(10)
    waiting = batcher.submit("embed", "b", 1)
    batcher.begin_stop(grace_s=0.0)  # over before "b" can start
    new = batcher.submit("embed", "c", 1)
    run.gate.set()
    assert running.result(10) == "embed:a"
    for future in (waiting, new):
        with pytest.raises(ClientError, match=r"^\[E216\]") as err:
            future.result(10)
        assert err.value.status == 503
    batcher.close(10)
    assert not batcher.alive and batcher.stats["refused"] == 1


def test_jobs_within_the_grace_period_are_answered():
    """Waiting when the stop begins, or arriving during it (a request still being read)."""
    run = Recorder()
    batcher = started(run, max_wait_s=0.0)
    running = batcher.submit("embed", "a", 1)
    assert run.started.wait(10)
    waiting = batcher.submit("embed", "b", 1)
    batcher.begin_stop(grace_s=60.0)
    late = batcher.submit("embed", "c", 1)
    run.gate.set()
    assert [f.result(10) for f in (running, waiting, late)] == ["embed:a", "embed:b",
                                                               "embed:c"]
    batcher.close(10)


def test_a_full_queue_refuses_with_its_limit():
    run = Recorder()
    batcher = started(run, max_wait_s=0.0, max_queue=1)
    running = batcher.submit("embed", "a", 1)
    assert run.started.wait(10)
    queued = batcher.submit("embed", "b", 1)
    with pytest.raises(ClientError, match=r"^\[E209\] The server has 1 requests waiting"):
        batcher.submit("embed", "c", 1).result(10)
    run.gate.set()
    assert running.result(10) and queued.result(10)
    batcher.close(10)


def test_a_closed_batcher_refuses():
    run = Recorder()
    run.gate.set()
    batcher = started(run)
    assert batcher.submit("embed", "a", 1).result(10) == "embed:a"
    batcher.close(10)
    with pytest.raises(ClientError, match=r"^\[E216\]"):
        batcher.submit("embed", "b", 1).result(1)


def test_a_worker_that_cannot_start_refuses_with_why():
    """A model thread whose setup failed answered "the server is stopping" (E216)."""
    def setup():
        raise RuntimeError("set_num_threads expects a positive integer")

    batcher = Batcher(lambda kind, payloads: payloads, setup=setup)
    waiting = batcher.submit("embed", "a", 1)  # queued before the worker starts
    batcher.start()
    with pytest.raises(ClientError, match=r"^\[E275\] .*set_num_threads") as err:
        waiting.result(10)
    assert err.value.status == 503
    with pytest.raises(ClientError, match=r"^\[E275\]"):
        batcher.submit("embed", "b", 1).result(1)
    assert not batcher.alive and not batcher.stopping
    batcher.close(10)


class Steps:
    """A runner whose payload "long:N" needs N steps of 100 tokens (CONTINUE until its last);
    any other payload runs in one step of 10 tokens. Records the batches."""

    def __init__(self):
        self.left = {}
        self.batches = []

    def measure(self, kind, payload, step_tokens):
        if not payload.startswith("long"):
            return 10, 10
        left = self.left.get(payload, int(payload.split(":")[1]))
        return 100, 100 * left

    def __call__(self, kind, payloads):
        self.batches.append(list(payloads))
        outcomes = []
        for payload in payloads:
            if payload.startswith("long"):
                left = self.left.setdefault(payload, int(payload.split(":")[1])) - 1
                self.left[payload] = left
                outcomes.append(CONTINUE if left else f"done {payload}")
            else:
                outcomes.append(f"done {payload}")
        return outcomes


def test_a_long_job_runs_in_steps_beside_new_ones():
    """Steps of an ongoing job join batches after the new jobs, taking at most as many
    tokens as they do (at least step_tokens), so a short job never waits for all its steps."""
    run = Steps()
    batcher = Batcher(run, max_wait_s=0.0, max_cost=1000, measure=run.measure,
                      step_tokens=100)
    long = batcher.submit("embed", "long:5", 100)
    batcher.start()
    assert long.result(10) == "done long:5"
    assert run.batches == [["long:5"]] * 5  # alone: a step a batch, at most step_tokens
    run.batches.clear()
    long = batcher.submit("embed", "long:3", 100)

    deadline = time.monotonic() + 10
    while not run.batches and time.monotonic() < deadline:
        time.sleep(0.001)
    short = [batcher.submit("embed", f"s{i}", 10) for i in range(3)]
    assert [f.result(10) for f in short] == ["done s0", "done s1", "done s2"]
    assert long.result(10) == "done long:3"
    batcher.close(10)
    assert sum(batch.count("long:3") for batch in run.batches) == 3
    assert batcher.stats["requests"] == 1 + 1 + 3  # a job counts once, however many steps


def a_long_job_in_its_first_step():
    """A batcher running "long:50" (50 steps), held inside its first step until the returned
    gate is set: (batcher, the job's future, the runner, the gate)."""
    run = Steps()
    gate = threading.Event()

    def held(kind, payloads):
        outcomes = run(kind, payloads)
        gate.wait(10)
        return outcomes

    batcher = Batcher(held, max_wait_s=0.0, measure=run.measure, step_tokens=100)
    batcher.start()
    long = batcher.submit("embed", "long:50", 100)
    deadline = time.monotonic() + 10
    while not run.batches and time.monotonic() < deadline:
        time.sleep(0.001)
    return batcher, long, run, gate


def test_a_stop_refuses_a_job_between_its_steps():
    batcher, long, run, gate = a_long_job_in_its_first_step()
    batcher.begin_stop(0.0)  # past the grace period at once: the next step is refused
    gate.set()
    with pytest.raises(ClientError, match=r"\[E216\]"):
        long.result(10)
    batcher.close(10)
    assert len(run.batches) == 1 and batcher.stats["refused"] == 1


def test_a_long_job_whose_client_left_stops_between_its_steps():
    """A running future cannot be cancelled: the job remembers the cancel, and its next step
    never runs (its work and memory are dropped)."""
    batcher, long, run, gate = a_long_job_in_its_first_step()
    assert not long.cancel()  # running: refused by the future, remembered by the job
    gate.set()
    with pytest.raises(CancelledError):
        long.result(10)
    batcher.close(10)
    assert len(run.batches) == 1 and batcher.stats["cancelled"] == 1
