"""What the worker writes for each way a handler can end (in-process worker, burst mode), for a
plain handler and for its `async def` twin alike (the `kind` fixture)."""

from __future__ import annotations

import threading
import time
from typing import Any

import pgwork_test_app  # noqa: F401 - registers the handlers
import pytest

from pgwork.db import Queue
from pgwork.worker.job import Job, PermanentError, StopReason
from pgwork.worker.options import WorkerOptions
from pgwork.worker.registry import REGISTRY, Registry
from pgwork.worker.runtime import Worker, check_result
from tests.support.rows import Rows
from tests.support.workers import Kind, run_burst


def test_success_writes_one_result_under_the_jobs_key(queue: Queue, kind: Kind) -> None:
    job_id = queue.enqueue(kind.t("sleep"), {"seconds": 0, "n": 7}, key="invoice-2026-000412")
    worker = run_burst(queue)
    row = queue.job(job_id)
    assert row is not None and row.status == "succeeded" and row.attempt_count == 1
    result = queue.result("invoice-2026-000412")
    assert result is not None
    assert result.job_id == job_id and result.produced_by == "inproc" and result.result["n"] == 7
    assert worker.metrics.jobs_finished.labels(kind.t("sleep"), "succeeded")._value.get() == 1


def test_derived_key_lands_the_effect_once(queue: Queue, kind: Kind) -> None:
    # Same work twice (no key given): the key is derived from type + payload, so the second
    # run's effect is the duplicate, not a second row.
    first = queue.enqueue(kind.t("noop"), {"n": 1})
    second = queue.enqueue(kind.t("noop"), {"n": 1})
    worker = run_burst(queue)
    assert {queue.job(first).status, queue.job(second).status} == {"succeeded"}
    key = queue.job(first).idempotency_key
    assert key == queue.job(second).idempotency_key
    assert key.startswith(f"{kind.t('noop')}:sha256:")
    finished = worker.metrics.jobs_finished
    assert finished.labels(kind.t("noop"), "succeeded")._value.get() == 1
    assert finished.labels(kind.t("noop"), "duplicate")._value.get() == 1


def test_exception_retries_with_backoff_then_dies(queue: Queue, kind: Kind) -> None:
    job_id = queue.enqueue(kind.t("fail"), {}, max_attempts=2)
    run_burst(queue)
    row = queue.job(job_id)
    assert row is not None
    assert row.status == "pending" and row.attempt_count == 1
    assert row.available_at > row.created_at  # pushed into the future by backoff
    assert row.last_error.startswith("RuntimeError: model backend returned 503 (attempt 1)")
    assert "Traceback" in row.last_error
    Rows(queue).ready_now(job_id)  # instead of sleeping through the backoff
    run_burst(queue)
    row = queue.job(job_id)
    assert row is not None and row.status == "dead" and row.attempt_count == 2
    assert "attempt 2" in row.last_error


def test_permanent_error_is_dead_at_once(queue: Queue, kind: Kind) -> None:
    job_id = queue.enqueue(kind.t("permanent"), {}, max_attempts=5)
    run_burst(queue)
    row = queue.job(job_id)
    assert row is not None and row.status == "dead" and row.attempt_count == 1
    assert "PermanentError: invoice has no number" in row.last_error


def test_result_that_is_not_json_is_a_permanent_failure(queue: Queue, kind: Kind) -> None:
    job_id = queue.enqueue(kind.t("bad_result"), {})
    run_burst(queue)
    row = queue.job(job_id)
    assert row is not None and row.status == "dead"
    assert "not JSON" in row.last_error
    assert queue.result(row.idempotency_key) is None


def test_system_exit_in_a_handler_does_not_stop_the_worker(queue: Queue, kind: Kind) -> None:
    bad = queue.enqueue(kind.t("exit"), {}, priority=0)
    good = queue.enqueue(kind.t("noop"), {"n": 2}, priority=1)
    run_burst(queue)
    assert queue.job(bad).status == "pending"
    assert queue.job(bad).last_error.startswith("SystemExit: 3")
    assert queue.job(good).status == "succeeded"


def test_batch_larger_than_concurrency_runs_everything_once(queue: Queue, kind: Kind) -> None:
    ids = [queue.enqueue(kind.t("noop"), {"n": i}) for i in range(30)]
    worker = run_burst(queue, concurrency=2, batch=10)
    assert worker.claims == 30
    assert all(queue.job(i).status == "succeeded" for i in ids)
    assert all(queue.job(i).attempt_count == 1 for i in ids)


def test_only_registered_types_are_claimed(queue: Queue) -> None:
    other = queue.enqueue("somebody_elses_type", {})
    run_burst(queue)
    assert queue.job(other).status == "pending"
    assert queue.job(other).attempt_count == 0


def test_unknown_job_type_option_is_refused(queue: Queue) -> None:
    options = WorkerOptions(app="pgwork_test_app", worker_id="x", job_types=("sleep", "nope"), metrics_port=0)
    with pytest.raises(ValueError, match="--job-types: no handler registered for nope"):
        Worker(queue, options, REGISTRY)
    with pytest.raises(ValueError, match="registers no handlers"):
        Worker(queue, WorkerOptions(app="empty", worker_id="x", metrics_port=0), Registry())


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        ({"a": 1}, True),
        ([1, "x", None], True),
        ("text", True),
        (None, True),
        (3.5, True),
        (float("nan"), False),
        ({1, 2}, False),
        ({"a": b"bytes"}, False),
        ("nul\x00", False),
        ("lone \ud800 surrogate", False),
    ],
)
def test_check_result(value: Any, ok: bool) -> None:
    assert (check_result(value) is None) is ok


def test_registry_refuses_a_second_handler_for_a_type() -> None:
    registry = Registry()
    registry.register("ocr", lambda job: None)
    with pytest.raises(ValueError, match="already has a handler"):
        registry.register("ocr", lambda job: 1)


def test_job_stop_reason_first_wins_and_wakes_sleep() -> None:
    job = Job(1, "t", {}, 1, 5, "k")
    assert job.sleep(0) and not job.should_stop
    threading.Timer(0.05, job.request_stop, args=(StopReason.CANCELLED,)).start()
    assert job.sleep(10) is False
    job.request_stop(StopReason.LEASE_LOST)
    assert job.cancelled and not job.lease_lost and job.stop_reason is StopReason.CANCELLED


def test_a_job_stopped_before_it_first_sleeps_does_not_sleep() -> None:
    # The stop Event is made by the first sleep: a stop requested earlier must still be seen.
    job = Job(1, "t", {}, 1, 5, "k")
    job.request_stop(StopReason.TIMED_OUT)
    started = time.monotonic()
    assert job.should_stop and job.sleep(10) is False and job.sleep(10) is False
    assert time.monotonic() - started < 1.0


def test_permanent_error_is_exported() -> None:
    import pgwork

    assert pgwork.PermanentError is PermanentError and pgwork.Job is Job
