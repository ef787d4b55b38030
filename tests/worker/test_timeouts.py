"""Hard timeouts at run time: an attempt past its timeout is failed with a clear error and retried
by its backoff; a handler that ignores the stop is abandoned, its slot refilled, its late return
ignored; past --max-abandoned the `pgwork worker` process drains and exits non-zero."""

from __future__ import annotations

import signal
import threading
from typing import Any

import pytest

from pgwork.backoff import Backoff
from pgwork.db import Queue
from pgwork.worker.job import Job
from pgwork.worker.registry import Registry
from pgwork.worker.runtime import Worker
from pgwork.worker.timeouts import EXIT_ABANDONED
from tests.support.waiting import wait_for
from tests.support.workers import InProcess, Spawn

# Retries far enough ahead that no attempt runs twice inside one test.
LATER = Backoff(base=300, cap=300, jitter=0)


def _worker(queue: Queue, registry: Registry, **kw: Any) -> tuple[Worker, InProcess]:
    """An in-process worker; its retries are spaced by the handlers' own backoffs."""
    running = InProcess(queue.dsn, registry, "timeouts", **kw)
    return running.worker, running


def _stop(worker: Worker, running: InProcess) -> None:
    running.stop()


SAMPLES = {
    "timed_out": "pgwork_jobs_timed_out_total",
    "abandoned": "pgwork_jobs_abandoned_total",
    "abandoned_threads": "pgwork_worker_abandoned_threads",
}


def _value(worker: Worker, name: str, job_type: str | None = None) -> float:
    """A sample as /metrics shows it."""
    labels = {"job_type": job_type} if job_type else {}
    value = worker.metrics.registry.get_sample_value(SAMPLES[name], labels)
    assert value is not None, name
    return value


def _failed_with(queue: Queue, job_id: int, text: str) -> Any:
    def failed() -> Any:
        row = queue.job(job_id)
        return row if row is not None and row.status != "running" and text in (row.last_error or "") else None

    return wait_for(failed, 20, what=f"job {job_id} failed with {text!r}")


def test_a_handler_that_stops_when_told_fails_the_attempt_and_retries(queue: Queue) -> None:
    registry = Registry()

    def overrun(job: Job) -> str:
        job.sleep(60)  # wakes when told to stop
        return "too late"

    registry.register("overrun", overrun, timeout="500ms", backoff=LATER)

    job_id = queue.enqueue("overrun", {})
    worker, thread = _worker(queue, registry)
    try:
        row = _failed_with(queue, job_id, "timed out after 500ms (the handler stopped when told")
    finally:
        _stop(worker, thread)
    assert row.status == "pending" and row.attempt_count == 1
    assert row.available_at > row.created_at  # retried by its backoff, not at once
    assert queue.result(row.idempotency_key) is None  # the value it returned was not written
    assert _value(worker, "timed_out", "overrun") == 1
    assert _value(worker, "abandoned", "overrun") == 0


def test_a_handler_that_ignores_the_stop_is_abandoned_and_its_late_return_changes_nothing(queue: Queue) -> None:
    registry = Registry()
    release = threading.Event()
    returned = threading.Event()

    def hung(job: Job) -> str:
        release.wait(60)  # ignores job.should_stop, as a hung library call would
        returned.set()
        return "late"

    registry.register("hung", hung, timeout="500ms", backoff=LATER)

    def quick(job: Job) -> str:
        return "done"

    registry.register("quick", quick)

    hung_id = queue.enqueue("hung", {})
    worker, thread = _worker(queue, registry, concurrency=1)
    try:
        row = _failed_with(queue, hung_id, "timed out after 500ms (handler did not return)")
        assert row.status == "pending" and row.attempt_count == 1 and row.lease_token is None
        assert _value(worker, "abandoned", "hung") == 1
        assert _value(worker, "abandoned_threads") == 1
        # The slot was refilled: with --concurrency 1 and the hung thread still inside its
        # handler, another job runs.
        quick_id = queue.enqueue("quick", {})
        wait_for(lambda: queue.job(quick_id).status == "succeeded", 20, what="the replacement runner ran a job")
        # The lease is no longer renewed: the worker holds nothing of the hung job.
        assert worker.holdings.get(hung_id) is None
        # The late return: the thread ends, and the row stays as the timeout left it.
        before = queue.job(hung_id)
        release.set()
        wait_for(returned.is_set, 10)
        wait_for(lambda: _value(worker, "abandoned_threads") == 0, 10, what="the abandoned thread ended")
        after = queue.job(hung_id)
        assert after == before
        assert queue.result(after.idempotency_key) is None
    finally:
        release.set()
        _stop(worker, thread)


def test_past_its_attempts_a_timed_out_job_is_dead(queue: Queue) -> None:
    registry = Registry()

    def overrun(job: Job) -> None:
        job.sleep(60)

    registry.register("overrun", overrun, timeout="300ms")

    job_id = queue.enqueue("overrun", {}, max_attempts=1)
    worker, thread = _worker(queue, registry)
    try:
        row = _failed_with(queue, job_id, "timed out after 300ms")
    finally:
        _stop(worker, thread)
    assert row.status == "dead" and row.attempt_count == 1


@pytest.mark.parametrize(
    ("handler_timeout", "job_timeout", "times_out"),
    [
        (None, 0.3, True),  # the job's own timeout where the handler has none
        ("30s", 0.3, True),  # the job's own, shorter, wins
        ("300ms", "30s", False),  # the job's own, longer, wins too
        (None, None, False),  # neither: no timeout
    ],
)
def test_the_jobs_own_timeout_overrides_its_handlers(
    queue: Queue, handler_timeout: str | None, job_timeout: float | str | None, times_out: bool
) -> None:
    registry = Registry()

    def nap(job: Job) -> str:
        return "rested" if job.sleep(1.0) else "told to stop"

    registry.register("nap", nap, timeout=handler_timeout, backoff=LATER)

    job_id = queue.enqueue("nap", {}, timeout=job_timeout)
    worker, thread = _worker(queue, registry)
    try:
        row = wait_for(
            lambda: (r := queue.job(job_id)) is not None and r.attempt_count and r.status != "running" and r, 20
        )
    finally:
        _stop(worker, thread)
    if times_out:
        assert row.status == "pending" and "timed out after 300ms" in row.last_error
    else:
        assert row.status == "succeeded" and queue.result(row.idempotency_key).result == "rested"


@pytest.mark.slow
def test_the_worker_process_exits_nonzero_past_max_abandoned_after_draining(queue: Queue, spawn_worker: Spawn) -> None:
    stuck = queue.enqueue("stuck", {"seconds": 120})
    draining = queue.enqueue("sleep", {"seconds": 2.5})
    worker = spawn_worker("--concurrency", "2", "--max-abandoned", "0", "--grace", "20s", "--lease", "6s")
    code = worker.wait(timeout=60)
    log = worker.log()
    assert code == EXIT_ABANDONED, log
    assert "--max-abandoned 0" in log and f"exiting {EXIT_ABANDONED}" in log
    row = queue.job(stuck)
    assert row.status == "pending" and "timed out after 1s (handler did not return)" in row.last_error
    # The job running beside it was drained, not dropped.
    assert queue.job(draining).status == "succeeded"
    # Nothing left for the reaper: no row still running under this worker's name.
    assert queue.running() == []


def test_within_max_abandoned_the_worker_keeps_working(queue: Queue, spawn_worker: Spawn) -> None:
    stuck = queue.enqueue("stuck", {"seconds": 120})
    worker = spawn_worker("--max-abandoned", "1", "--lease", "6s")
    try:
        _failed_with(queue, stuck, "handler did not return")
        after = queue.enqueue("noop", {"n": 1})
        wait_for(lambda: queue.job(after).status == "succeeded", 20, what="the worker still working")
        assert worker.alive()
    finally:
        worker.signal(signal.SIGTERM)
        assert worker.wait(timeout=30) == 0


def test_an_async_handler_past_its_timeout_is_cancelled_and_the_attempt_retries(queue: Queue) -> None:
    import asyncio

    registry = Registry()
    cancelled = threading.Event()

    async def overrun(job: Job) -> str:
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "too late"

    registry.register("async-overrun", overrun, timeout="500ms", backoff=LATER)
    job_id = queue.enqueue("async-overrun", {})
    worker, thread = _worker(queue, registry)
    try:
        row = _failed_with(queue, job_id, "timed out after 500ms")
    finally:
        _stop(worker, thread)
    assert cancelled.is_set()  # the task was cancelled at its await, not left running
    assert row.status == "pending" and row.attempt_count == 1
    assert row.available_at > row.created_at
    assert _value(worker, "timed_out", "async-overrun") == 1
    assert _value(worker, "abandoned", "async-overrun") == 0


def test_a_worker_giving_up_on_stuck_threads_starts_no_further_job(queue: Queue) -> None:
    # Issue 25: with --concurrency 1 the abandoned attempt's failure was written by a write that
    # also claimed the next job, which then ran (and timed out, an attempt burned) although the
    # worker was about to drain. Giving up comes first now: that write claims nothing.
    registry = Registry()
    release = threading.Event()
    started: list[int] = []

    def hung(job: Job) -> str:
        started.append(job.id)
        release.wait(60)  # ignores job.should_stop
        return "late"

    registry.register("hung", hung, timeout="300ms", backoff=LATER)
    ids = [queue.enqueue("hung", {"n": n}) for n in range(3)]
    worker, running = _worker(queue, registry, concurrency=1, max_abandoned=0, grace=1)
    try:
        running.join(20)  # it gives up and ends on its own
    finally:
        release.set()
    assert worker.exit_code == EXIT_ABANDONED
    assert len(started) == 1
    for job_id in ids:
        row = queue.job(job_id)
        assert row is not None and row.status == "pending" and row.lease_token is None
        # Only the abandoned job used an attempt; the others were never claimed.
        assert row.attempt_count == (1 if job_id == started[0] else 0), (job_id, row.attempt_count)
