"""pgwork.set_state_if_held, called the way a hostile worker would: with its own real lease but
arguments of its choosing. Each refusal leaves the row as it was."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from pgwork.db import Queue
from pgwork.models import FailOutcome, Lease
from tests.support.db import MakeRole

APPLY = "SELECT status, available_at - now() AS wait FROM pgwork.set_state_if_held(%s, %s, %s, %s, %s, 'boom')"


def _row(dsn: str, job_id: int) -> tuple[Any, ...]:
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            "SELECT status::text, attempt_count, max_attempts, available_at, lease_token, last_error"
            " FROM pgwork.jobs WHERE id = %s",
            (job_id,),
        ).fetchone()
    assert row is not None
    return row


def _claimed(dsn: str, worker: str, max_attempts: int = 5) -> Lease:
    with Queue(dsn) as owner:
        owner.enqueue("ocr", {"n": 1}, max_attempts=max_attempts)
    with Queue(worker) as q:
        [job] = q.claim("pod", lease=300)
    return job.lease


@pytest.mark.parametrize(
    ("state", "reason", "delay", "error"),
    [
        # Burying a job early under a false reason.
        ("dead", "attempts_used_up", None, psycopg.errors.CheckViolation),
        # No reason, or a made-up one.
        ("dead", None, None, psycopg.errors.InvalidParameterValue),
        ("dead", "bored", None, psycopg.errors.InvalidParameterValue),
        # States a failure does not lead to.
        ("succeeded", None, None, psycopg.errors.InvalidParameterValue),
        ("running", None, 1.0, psycopg.errors.InvalidParameterValue),
        ("cancelled", None, None, psycopg.errors.InvalidParameterValue),
        # A retry without a delay.
        ("pending", None, None, psycopg.errors.InvalidParameterValue),
    ],
)
def test_a_worker_cannot_make_its_own_job_do_what_a_failure_does_not(
    dsn: str, make_role: MakeRole, state: str, reason: str | None, delay: float | None, error: type[Exception]
) -> None:
    worker = make_role("worker")
    lease = _claimed(dsn, worker)
    before = _row(dsn, lease.job_id)
    with psycopg.connect(worker, autocommit=True) as conn, pytest.raises(error):
        conn.execute(APPLY, (lease.job_id, lease.token, state, reason, delay))
    assert _row(dsn, lease.job_id) == before


def test_a_retry_is_scheduled_at_most_a_day_ahead_and_refunds_no_attempt(dsn: str, make_role: MakeRole) -> None:
    worker = make_role("worker")
    lease = _claimed(dsn, worker)
    with psycopg.connect(worker, autocommit=True) as conn:
        [(status, wait)] = conn.execute(APPLY, (lease.job_id, lease.token, "pending", None, 365 * 86400.0)).fetchall()
    assert status == "pending" and 86_390 <= wait.total_seconds() <= 86_400
    status, attempts, budget, *_ = _row(dsn, lease.job_id)
    assert (status, attempts, budget) == ("pending", 1, 5)


def test_a_retry_past_the_budget_is_applied_as_dead(dsn: str, make_role: MakeRole) -> None:
    worker = make_role("worker")
    lease = _claimed(dsn, worker, max_attempts=1)
    with psycopg.connect(worker, autocommit=True) as conn:
        [(status, _)] = conn.execute(APPLY, (lease.job_id, lease.token, "pending", None, 1.0)).fetchall()
    assert status == "dead"
    # A lease made by hand does not know the budget; the Queue asks for the retry, the database says dead.
    lease = _claimed(dsn, worker, max_attempts=1)
    forged_budget = Lease(lease.job_id, lease.token, lease.owner, lease.attempt)
    with Queue(worker) as q:
        assert q.fail(forged_budget, "boom").outcome is FailOutcome.DEAD
    assert _row(dsn, lease.job_id)[:3] == ("dead", 1, 1)


def test_dead_for_a_true_reason_is_applied(dsn: str, make_role: MakeRole) -> None:
    worker = make_role("worker")
    for reason, budget in (("not_retryable", 5), ("attempts_used_up", 1)):
        lease = _claimed(dsn, worker, max_attempts=budget)
        with psycopg.connect(worker, autocommit=True) as conn:
            [(status, _)] = conn.execute(APPLY, (lease.job_id, lease.token, "dead", reason, None)).fetchall()
        assert status == "dead"
        assert _row(dsn, lease.job_id)[4:] == (None, "boom")  # lease gone, error kept
