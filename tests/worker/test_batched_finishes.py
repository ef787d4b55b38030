"""The worker's batched finishes against a real database: outcomes of many jobs share a write,
every job is still fenced by its own token, a job whose write is pending stays heartbeated, and
--batch caps every claim."""

from __future__ import annotations

import pgwork_test_app  # noqa: F401 - registers the handlers
import psycopg

from pgwork.db import Queue
from pgwork.worker.attempt import Attempt, AttemptState
from pgwork.worker.finishes import Finisher
from pgwork.worker.heartbeat import Heartbeat
from pgwork.worker.holdings import Holdings
from pgwork.worker.job import Job
from pgwork.worker.metrics import WorkerMetrics
from pgwork.worker.outcome import Decision, Outcome
from tests.support.rows import Rows
from tests.support.waiting import wait_for
from tests.support.workers import run_burst


def test_many_jobs_share_a_write_and_each_lands_once(queue: Queue) -> None:
    ids = [queue.enqueue("noop", {"n": i}) for i in range(200)]
    failing = [queue.enqueue("permanent", {"n": i}) for i in range(20)]
    worker = run_burst(queue, concurrency=4, batch=50)
    assert all(queue.job(i).status == "succeeded" for i in ids)  # type: ignore[union-attr]
    assert all(queue.job(i).status == "dead" for i in failing)  # type: ignore[union-attr]
    assert all(queue.job(i).attempt_count == 1 for i in ids + failing)  # type: ignore[union-attr]
    assert worker.claims == 220
    # Batched: far fewer writes than jobs (one per job before).
    assert worker.finisher.flushes < 220 / 2
    finished = worker.metrics.jobs_finished
    assert finished.labels("noop", "succeeded")._value.get() == 200
    assert finished.labels("permanent", "dead")._value.get() == 20


def test_batch_caps_every_claim(queue: Queue) -> None:
    for i in range(40):
        queue.enqueue("noop", {"n": i})
    worker = run_burst(queue, concurrency=8, batch=3)
    claims = worker.metrics.claim_duration.collect()[0]
    count = next(s.value for s in claims.samples if s.name.endswith("_count"))
    assert worker.claims == 40
    assert count >= 40 / 3  # never more than 3 per claim (it claimed max(8, 3) = 8 before)


def _lease_expiry(dsn: str, job_id: int) -> object:
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT lease_expires_at FROM pgwork.jobs WHERE id = %s", (job_id,)).fetchone()
    assert row is not None
    return row[0]


def test_a_job_whose_write_is_pending_is_still_heartbeated(queue: Queue) -> None:
    claimed = Rows(queue, "noop").running(lease=30)
    holdings = Holdings()
    job = Job(claimed.id, claimed.job_type, {}, claimed.attempt, claimed.max_attempts, claimed.idempotency_key)
    held = Attempt(claimed, job, 30)
    held.state = AttemptState.FINISHING
    holdings.add(held)
    before = _lease_expiry(queue.dsn, claimed.id)
    heartbeat = Heartbeat(queue, holdings, WorkerMetrics(), interval=1, lease=300)
    try:
        heartbeat.beat()
    finally:
        heartbeat._close()
    assert _lease_expiry(queue.dsn, claimed.id) > before  # type: ignore[operator]
    assert not job.should_stop


def _finishing(queue: Queue, job_type: str) -> Attempt:
    claimed = Rows(queue, job_type).running(lease=30)
    job = Job(claimed.id, claimed.job_type, {}, claimed.attempt, claimed.max_attempts, claimed.idempotency_key)
    attempt = Attempt(claimed, job, 30, decision=Decision(Outcome.SUCCEEDED, result_json='{"ok": true}'))
    attempt.state = AttemptState.FINISHING
    return attempt


def test_a_batch_calls_outcomes_are_written_without_the_linger(queue: Queue) -> None:
    """Runners stay busy throughout and the linger is an hour: single outcomes wait in it; a batch
    call's (linger=False) are written at once, and take whatever else is pending along."""
    written: list[list[int]] = []
    finisher = Finisher(
        queue,
        lambda answers, _wake: written.append([a.id for a, _ in answers]),
        lambda: True,
        lambda: None,
        linger=3600,
    )
    finisher.start()
    try:
        single = _finishing(queue, "noop")
        finisher.submit(single, may_write=False)
        batch = [_finishing(queue, "embed") for _ in range(3)]
        assert written == []  # the single outcome lingers (the runners are busy)
        finisher.submit_many(batch, may_write=False, linger=False)
        wait_for(lambda: written, 20, what="the batch written")
    finally:
        finisher.stop()
        finisher.join(20)
    assert written == [[single.id, *(a.id for a in batch)]]
    assert all(queue.job(a.id).status == "succeeded" for a in [single, *batch])  # type: ignore[union-attr]
