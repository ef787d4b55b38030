"""pgwork.fail_many and Queue.finish_many: many fenced finishes in one statement / transaction,
called the way a hostile worker would (stale tokens, other workers' jobs, a role without the
worker profile), and a database at the previous version carried forward."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import psycopg
import pytest
from psycopg import sql

from pgwork import sql_files
from pgwork.db import Queue, migrate
from pgwork.db.batches import DecidedFailure, StoredSuccess
from pgwork.failure import decide_failure
from pgwork.models import Completion, FailOutcome, Lease
from tests.support.db import V1_JOBS, MakeRole, by_key, drop_roles, snapshot
from tests.support.rows import Rows
from tests.support.versions import at_version


def _retry(lease: Lease, error: str = "boom") -> DecidedFailure:
    return DecidedFailure(lease, decide_failure(lease.attempt, 5, True, 30.0, datetime.now(UTC)), error)


def _dead(lease: Lease, error: str = "bad input") -> DecidedFailure:
    return DecidedFailure(lease, decide_failure(lease.attempt, 5, False, 0.0, datetime.now(UTC)), error)


def _state(dsn: str, job_id: int) -> tuple[object, ...]:
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            "SELECT status::text, attempt_count, lease_token, last_error, available_at FROM pgwork.jobs WHERE id = %s",
            (job_id,),
        ).fetchone()
    assert row is not None
    return row


def test_a_token_that_does_not_hold_the_lease_changes_nothing(dsn: str, make_role: MakeRole) -> None:
    worker = make_role("worker")
    with Queue(worker) as q:
        rows = Rows(q, "ocr")
        mine = rows.running(owner="me")
        theirs = rows.running(owner="them")
        finished = rows.running(owner="me")
        assert q.succeed(finished.lease, {"ok": 1}) is Completion.CREATED
        before_theirs, before_finished = _state(dsn, theirs.id), _state(dsn, finished.id)
        forged = Lease(theirs.id, uuid.uuid4(), "me", theirs.attempt, theirs.max_attempts)
        answers = q.fail_many([_retry(mine.lease), _dead(forged), _dead(finished.lease)])
    assert answers[mine.id].outcome is FailOutcome.RETRY and answers[mine.id].available_at is not None
    assert answers[theirs.id].outcome is FailOutcome.LEASE_LOST
    assert answers[finished.id].outcome is FailOutcome.LEASE_LOST
    assert _state(dsn, theirs.id) == before_theirs  # still running under their token
    assert _state(dsn, finished.id) == before_finished
    assert _state(dsn, mine.id)[:4] == ("pending", 1, None, "boom")


def test_one_refused_element_changes_nothing_in_the_batch(dsn: str, make_role: MakeRole) -> None:
    worker = make_role("worker")
    with Queue(worker) as q:
        rows = Rows(q, "ocr")
        a, b = rows.running(), rows.running()
    before = _state(dsn, a.id), _state(dsn, b.id)
    with psycopg.connect(worker, autocommit=True) as conn, pytest.raises(psycopg.errors.CheckViolation):
        # b is on its first of five attempts: "attempts used up" is a lie the function refuses.
        conn.execute(
            "SELECT * FROM pgwork.fail_many(%s, %s, %s, %s, %s, %s)",
            (
                [a.id, b.id],
                [a.lease.token, b.lease.token],
                ["pending", "dead"],
                [None, "attempts_used_up"],
                [1.0, None],
                ["e", "e"],
            ),
        )
    assert (_state(dsn, a.id), _state(dsn, b.id)) == before


@pytest.mark.parametrize("profile", ["reader", "producer", "reaper", "maintainer"])
def test_only_the_worker_profile_may_fail_many(dsn: str, make_role: MakeRole, profile: str) -> None:
    with Queue(dsn) as q:
        held = Rows(q, "ocr").running()
    before = _state(dsn, held.id)
    other = make_role(profile)
    with psycopg.connect(other, autocommit=True) as conn, pytest.raises(psycopg.errors.InsufficientPrivilege):
        conn.execute(
            "SELECT * FROM pgwork.fail_many(%s, %s, %s, %s, %s, %s)",
            ([held.id], [held.lease.token], ["dead"], ["not_retryable"], [None], ["mine now"]),
        )
    assert _state(dsn, held.id) == before


def test_finish_many_writes_successes_and_failures_in_one_transaction(queue: Queue) -> None:
    rows = Rows(queue, "ocr")
    ok, dup, failed, stale = (rows.running(key=k) for k in ("k-ok", "k-dup", "k-fail", "k-stale"))
    queue.enqueue("other", {}, key="k-dup-elsewhere")
    # dup's key already has a result (another run wrote it): the job succeeds, the row stays.
    other = Rows(queue, "twin").running(key="k-dup")
    assert queue.succeed(other.lease, "first") is Completion.CREATED
    forged = Lease(stale.id, uuid.uuid4(), "x", 1, 5)
    completions, failures = queue.finish_many(
        [StoredSuccess(ok.lease, '{"n": 1}'), StoredSuccess(dup.lease, '"second"'), StoredSuccess(forged, "1")],
        [_dead(failed.lease)],
    )
    assert completions == {
        ok.id: Completion.CREATED,
        dup.id: Completion.ALREADY_EXISTED,
        stale.id: Completion.LEASE_LOST,
    }
    assert failures[failed.id].outcome is FailOutcome.DEAD
    assert queue.result("k-ok").result == {"n": 1}  # type: ignore[union-attr]
    assert queue.result("k-dup").result == "first"  # type: ignore[union-attr]
    assert queue.job(stale.id).status == "running"  # type: ignore[union-attr]
    with pytest.raises(Exception, match="more than once"):
        queue.finish_many([StoredSuccess(ok.lease, "1")], [_dead(ok.lease)])


def _at_previous_version(dsn: str) -> int:
    """Migrations 1..latest-1 applied by hand, as an older pgwork left the database (a
    no-transaction one statement by statement, as `migrate` runs it)."""
    previous = sql_files.latest_version() - 1
    at_version(dsn, previous)
    return previous


def test_previous_version_with_jobs_in_every_state_gains_fail_many(empty_dsn: str) -> None:
    previous = _at_previous_version(empty_dsn)
    worker = f"pgwork_prev_worker_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(empty_dsn) as conn:
        conn.execute(V1_JOBS)
        conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(worker)))
        conn.execute("SELECT pgwork.grant_profiles(%s, ARRAY['worker'])", (worker,))
    try:
        before = snapshot(empty_dsn)
        ids = by_key(empty_dsn)
        assert migrate(empty_dsn) == list(range(previous + 1, sql_files.latest_version() + 1))
        assert snapshot(empty_dsn) == before  # every row, every column
        # The role granted the worker profile before the upgrade fails many through the new function.
        with Queue(psycopg.conninfo.make_conninfo(empty_dsn, user=worker)) as q:
            running = Lease(ids["running"], uuid.UUID("11111111-1111-1111-1111-111111111111"), "old-pod", 1, 5)
            lapsed_forged = Lease(ids["lapsed"], uuid.uuid4(), "old-pod", 1, 5)
            answers = q.fail_many([_retry(running, "after the upgrade"), _retry(lapsed_forged)])
        assert answers[ids["running"]].outcome is FailOutcome.RETRY
        assert answers[ids["lapsed"]].outcome is FailOutcome.LEASE_LOST
        assert _state(empty_dsn, ids["running"])[:4] == ("pending", 1, None, "after the upgrade")
        assert _state(empty_dsn, ids["lapsed"])[0] == "running"
    finally:
        drop_roles(empty_dsn, [worker])
