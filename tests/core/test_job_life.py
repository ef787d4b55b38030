"""The job's life after the claim: heartbeat, finish, retry, dead, reap, cancel, requeue, prune,
and fencing on every write about a running job."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import psycopg
import pytest

from pgwork.backoff import Backoff
from pgwork.db import Queue
from pgwork.errors import InvalidArgument
from pgwork.models import Completion, FailOutcome, LeaseState


def _soon(seconds: float) -> datetime:
    return datetime.now(UTC) + timedelta(seconds=seconds)


def _count(dsn: str, query: str) -> int:
    with psycopg.connect(dsn) as conn:
        row = conn.execute(query).fetchone()
    assert row is not None
    return int(row[0])


def test_fencing_after_reap_and_reclaim(queue: Queue, dsn: str) -> None:
    job_id = queue.enqueue("ocr", {"doc": 1}, key="doc-1")
    [a] = queue.claim("worker-a", lease=10)
    # A stalls past its lease; the reaper hands the job on; B claims it.
    later = _soon(15)
    [reclaimed] = queue.reap(now=later)
    assert (reclaimed.id, reclaimed.previous_owner, reclaimed.status) == (job_id, "worker-a", "pending")
    [b] = queue.claim("worker-b", lease=30, now=later)
    assert b.id == job_id and b.lease.token != a.lease.token
    before = queue.job(job_id)

    # A wakes up: everything it tries is refused and changes nothing.
    assert queue.heartbeat(a.lease, lease_seconds=30) is LeaseState.LOST
    assert queue.succeed(a.lease, {"by": "a"}) is Completion.LEASE_LOST
    assert queue.fail(a.lease, "a failed").outcome is FailOutcome.LEASE_LOST
    assert queue.release(a.lease) is False
    assert queue.acknowledge_cancel(a.lease) is False
    assert queue.job(job_id) == before
    assert _count(dsn, "SELECT count(*) FROM pgwork.job_results") == 0

    # B still holds it and finishes it.
    assert queue.heartbeat(b.lease, lease_seconds=30) is LeaseState.HELD
    assert queue.succeed(b.lease, {"by": "b"}) is Completion.CREATED
    result = queue.result("doc-1")
    assert result is not None and result.produced_by == "worker-b" and result.result == {"by": "b"}
    row = queue.job(job_id)
    assert row is not None and row.status == "succeeded" and row.attempt_count == 2


def test_same_name_restarted_pod_is_not_the_old_owner(queue: Queue) -> None:
    queue.enqueue("ocr", {"doc": 1})
    [old] = queue.claim("pod-0", lease=5)
    later = _soon(10)
    queue.reap(now=later)
    [new] = queue.claim("pod-0", lease=30, now=later)  # StatefulSet-style: same name, new process
    assert queue.succeed(old.lease, {"stale": True}) is Completion.LEASE_LOST
    assert queue.succeed(new.lease, {"fresh": True}) is Completion.CREATED


def test_heartbeat_renews_and_reports(queue: Queue) -> None:
    queue.enqueue("ocr", {"doc": 1})
    queue.enqueue("ocr", {"doc": 2})
    a, b = queue.claim("w", limit=2, lease=10)
    at = _soon(8)
    assert queue.heartbeat_many([a.lease, b.lease], lease_seconds=10, now=at) == {
        a.id: LeaseState.HELD,
        b.id: LeaseState.HELD,
    }
    # Renewed from `at`, so a reap at the old expiry finds nothing.
    assert queue.reap(now=_soon(12)) == []
    row = queue.job(a.id)
    assert row is not None and row.lease_expires_at == at + timedelta(seconds=10)
    assert queue.heartbeat_many([]) == {}


def test_retry_schedule_then_dead_keeping_last_error(queue: Queue) -> None:
    q = queue
    q.backoff = Backoff(base=10, cap=1000, jitter=0)
    job_id = q.enqueue("ocr", {"doc": 1}, max_attempts=3)
    at = datetime.now(UTC) + timedelta(seconds=1)
    delays = []
    for attempt in (1, 2):
        [job] = q.claim("w", now=at)
        assert job.attempt == attempt
        failure = q.fail(job.lease, f"model backend returned 503 (try {attempt})", now=at)
        assert failure.outcome is FailOutcome.RETRY and failure.available_at is not None
        delays.append((failure.available_at - at).total_seconds())
        assert q.claim("w", now=at) == []  # not visible until the backoff passes
        at = failure.available_at
    assert delays == [10.0, 20.0]  # base * 2^(attempt-1)
    [job] = q.claim("w", now=at)
    assert q.fail(job.lease, "model backend returned 503", now=at).outcome is FailOutcome.DEAD
    row = q.job(job_id)
    assert row is not None
    assert (row.status, row.attempt_count, row.last_error) == ("dead", 3, "model backend returned 503")
    assert row.completed_at == at and row.lease_token is None
    [dead] = q.dead()
    assert dead.id == job_id and dead.last_error == "model backend returned 503"


def test_permanent_failure_is_dead_at_once(queue: Queue) -> None:
    job_id = queue.enqueue("ocr", {"doc": 1}, max_attempts=5)
    [job] = queue.claim("w")
    assert queue.fail(job.lease, "unsupported file type", retryable=False).outcome is FailOutcome.DEAD
    row = queue.job(job_id)
    assert row is not None and (row.status, row.attempt_count) == ("dead", 1)


def test_reaper_keeps_attempts_and_writes_a_note(queue: Queue) -> None:
    job_id = queue.enqueue("ocr", {"doc": 1})
    queue.claim("w2", lease=10)
    assert queue.reap(now=_soon(5)) == []  # not expired yet
    [r] = queue.reap(now=_soon(15))
    assert r.attempt_count == 1 and r.overdue_seconds > 4
    row = queue.job(job_id)
    assert row is not None
    assert (row.status, row.attempt_count, row.lease_owner, row.lease_token) == ("pending", 1, None, None)
    assert "[lease expired, reclaimed from w2 at" in row.last_error
    assert queue.reap(now=_soon(30)) == []  # nothing left to reap


def test_reaper_buries_a_job_that_keeps_killing_its_worker(queue: Queue) -> None:
    job_id = queue.enqueue("ocr", {"doc": "poison"}, max_attempts=2)
    at = _soon(1)
    for _ in range(2):
        queue.claim("w", lease=5, now=at)
        at += timedelta(seconds=10)
        queue.reap(now=at)
    row = queue.job(job_id)
    assert row is not None and (row.status, row.attempt_count) == ("dead", 2)
    assert row.last_error.count("lease expired") == 2


def test_reaper_leaves_a_job_completed_a_moment_earlier(queue: Queue) -> None:
    queue.enqueue("ocr", {"doc": 1})
    [job] = queue.claim("w", lease=1)
    assert queue.succeed(job.lease, {"ok": True}) is Completion.CREATED
    assert queue.reap(now=_soon(60)) == []
    row = queue.job(job.id)
    assert row is not None and row.status == "succeeded"


def test_lab_idempotency_run(queue: Queue, dsn: str) -> None:
    """Worker A finishes; the row is forced back to pending (A 'died before commit'); B runs it again."""
    job_id = queue.enqueue("extract", {"invoice": "2026-000412"}, key="invoice-2026-000412")
    [a] = queue.claim("worker-a")
    assert queue.succeed(a.lease, {"total": 100}) is Completion.CREATED
    with psycopg.connect(dsn) as conn:
        conn.execute("UPDATE pgwork.jobs SET status = 'pending', completed_at = NULL WHERE id = %s", (job_id,))
    [b] = queue.claim("worker-b")
    assert queue.succeed(b.lease, {"total": 100}) is Completion.ALREADY_EXISTED
    row = queue.job(job_id)
    assert row is not None and (row.status, row.attempt_count) == ("succeeded", 2)
    assert _count(dsn, "SELECT count(*) FROM pgwork.job_results") == 1
    result = queue.result("invoice-2026-000412")
    assert result is not None and result.produced_by == "worker-a" and result.job_id == job_id


def test_succeed_in_the_callers_transaction(queue: Queue, dsn: str) -> None:
    queue.enqueue("ocr", {"doc": 1}, key="k")
    [job] = queue.claim("w")
    with psycopg.connect(dsn) as conn, conn.transaction(force_rollback=True):
        assert queue.succeed(job.lease, {"ok": 1}, conn=conn) is Completion.CREATED
    # rolled back with the caller's business write: still running, no result
    row = queue.job(job.id)
    assert row is not None and row.status == "running" and queue.result("k") is None
    assert queue.succeed(job.lease, {"ok": 1}) is Completion.CREATED


@pytest.mark.parametrize("bad", [{"x": {1}}, {"x": float("nan")}, object()])
def test_result_that_is_not_json_is_refused_before_writing(queue: Queue, bad: object) -> None:
    queue.enqueue("ocr", {"doc": 1})
    [job] = queue.claim("w")
    with pytest.raises(InvalidArgument, match="result"):
        queue.succeed(job.lease, bad)
    row = queue.job(job.id)
    assert row is not None and row.status == "running"


def test_release_returns_the_job_without_refund(queue: Queue) -> None:
    queue.enqueue("ocr", {"doc": 1})
    [job] = queue.claim("w")
    assert queue.release(job.lease, "worker shutting down") is True
    row = queue.job(job.id)
    assert row is not None
    assert (row.status, row.attempt_count, row.lease_owner) == ("pending", 1, None)
    assert "worker shutting down (w, attempt 1)" in row.last_error
    [again] = queue.claim("w2")
    assert again.attempt == 2  # attempt_count counts claims


def test_cancel_pending_and_running(queue: Queue) -> None:
    pending = queue.enqueue("ocr", {"doc": 1})
    running = queue.enqueue("ocr", {"doc": 2})
    [job] = queue.claim("w", job_types=["ocr"], limit=1)
    assert job.id == pending  # the first one; swap roles
    report = queue.cancel([running, job.id, 999])
    assert report.cancelled == [running] and report.requested == [job.id] and report.not_cancellable == [999]
    assert queue.heartbeat(job.lease) is LeaseState.CANCEL_REQUESTED
    assert queue.release(job.lease) is False  # a cancelled job is not put back
    assert queue.acknowledge_cancel(job.lease) is True
    statuses = {i: getattr(queue.job(i), "status", None) for i in (pending, running)}
    assert statuses == {pending: "cancelled", running: "cancelled"}


def test_acknowledge_cancel_needs_a_request(queue: Queue) -> None:
    queue.enqueue("ocr", {"doc": 1})
    [job] = queue.claim("w")
    assert queue.acknowledge_cancel(job.lease) is False  # nobody asked: the job keeps running
    row = queue.job(job.id)
    assert row is not None and row.status == "running"


def test_cancel_requested_job_whose_worker_died_ends_cancelled(queue: Queue) -> None:
    queue.enqueue("ocr", {"doc": 1})
    [job] = queue.claim("w", lease=5)
    queue.cancel([job.id])
    [r] = queue.reap(now=_soon(10))
    assert r.status == "cancelled"


def test_requeue_dead_with_more_attempts(queue: Queue) -> None:
    job_id = queue.enqueue("ocr", {"doc": 1}, max_attempts=1)
    [job] = queue.claim("w")
    queue.fail(job.lease, "boom")
    assert queue.retry([job_id, 12345], max_attempts=3) == [job_id]
    row = queue.job(job_id)
    assert row is not None and (row.status, row.max_attempts, row.attempt_count) == ("pending", 3, 1)
    assert row.last_error.startswith("boom [requeued by hand at")
    assert queue.retry([job_id]) == []  # pending jobs are not "retried"


def test_prune_deletes_only_old_history_and_keeps_results(queue: Queue, dsn: str) -> None:
    done = queue.enqueue("ocr", {"doc": 1})
    queue.enqueue("ocr", {"doc": 2})  # stays pending
    [job] = queue.claim("w", job_types=["ocr"])
    queue.succeed(job.lease, {"ok": True})
    assert queue.prune(timedelta(days=1)) == 0  # too young
    assert queue.prune(timedelta(days=1), now=_soon(2 * 86400), batch=1) == 1
    assert queue.job(done) is None
    assert _count(dsn, "SELECT count(*) FROM pgwork.jobs WHERE status = 'pending'") == 1
    assert _count(dsn, "SELECT count(*) FROM pgwork.job_results") == 1
    with pytest.raises(InvalidArgument):
        queue.prune(timedelta(days=1), statuses=["running"])


def test_operator_questions(queue: Queue) -> None:
    queue.enqueue("ocr", {"doc": 1})
    queue.enqueue("ocr", {"doc": 2}, delay=300)
    queue.enqueue("embed", {"doc": 3})
    failing = queue.enqueue("embed", {"doc": 4}, priority=0)
    [f] = queue.claim("w", job_types=["embed"])
    assert f.id == failing
    queue.fail(f.lease, "timeout", delay=60)
    [r] = queue.claim("w", job_types=["embed"], lease=30)
    at = _soon(10)
    stats = {s.job_type: s for s in queue.stats(now=at)}
    assert (stats["ocr"].ready, stats["ocr"].scheduled, stats["ocr"].running) == (1, 1, 0)
    assert (stats["embed"].ready, stats["embed"].retrying, stats["embed"].running) == (0, 1, 1)
    assert stats["ocr"].oldest_wait_seconds >= 10
    assert 9 <= stats["embed"].max_heartbeat_age_seconds <= 12
    assert [s.job_type for s in queue.stats(["ocr"], now=at)] == ["ocr"]
    [running] = queue.running(now=at)
    assert running.id == r.id and running.lease_owner == "w" and 18 <= running.lease_remaining_seconds <= 21
    [retrying] = queue.retrying(now=at)
    assert retrying.id == failing and retrying.last_error == "timeout" and 45 <= retrying.retry_in_seconds <= 51
    assert queue.running_by_owner() == {"w": 1}
    assert queue.running_by_owner(["ocr"]) == {}
