"""The ready ring (migration 23): pgwork.ready holds exactly the pending jobs after every kind of
transition, and under a held vacuum horizon the claim's cost stays bounded once drained segments
are truncated, where the jobs table's own claim index keeps growing."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

from pgwork.db import Queue, claim_statement
from pgwork.models import NewJob
from pgwork.schedule import Schedule
from tests.support.ring import ready_is_pending

SEGMENT_SECONDS = 10


def test_every_transition_keeps_ready_equal_to_the_pending_jobs(queue: Queue, dsn: str) -> None:
    t0 = datetime.now(UTC)
    steps: list[tuple[str, int]] = []

    def check(step: str) -> None:
        steps.append((step, ready_is_pending(dsn)))

    a = queue.enqueue("t", {"n": 1})
    queue.enqueue("t", {"n": 2}, available_at=t0 + timedelta(hours=1))
    check("enqueue")
    queue.enqueue_many([NewJob("t", {"n": i}) for i in range(10)])
    check("enqueue_many")
    # Past BULK_THRESHOLD: COPY. 3,100 rows, about 2,070 left after the delete below: should they
    # straddle two 10 s periods, one segment still holds over 1,000 and is thinned (1,500 left 1,000,
    # which a straddle could split into two segments of under 1,000 each, both truncated).
    queue.enqueue_many([NewJob("bulk", {"n": i}) for i in range(3100)])
    check("enqueue_many by COPY")
    queue.enqueue("u", {"n": 1}, key="only-once", unique=True)
    queue.enqueue("u", {"n": 2}, key="only-once", unique=True)  # a duplicate: no second row anywhere
    check("unique enqueue")
    assert queue.cancel([a]).cancelled == [a]
    check("cancel pending")
    claimed = queue.claim("w", job_types=["t"], limit=4)
    assert len(claimed) == 4
    check("claim")
    queue.fail(claimed[0].lease, "boom", delay=60)  # backoff: pending again, later
    check("fail with backoff")
    queue.fail(claimed[1].lease, "fatal", retryable=False)  # dead
    check("fail, dead")
    assert queue.retry([claimed[1].id]) == [claimed[1].id]
    check("retry dead")
    queue.release(claimed[2].lease)
    check("release")
    queue.succeed(claimed[3].lease, {"ok": True})
    check("succeed")
    [lapsing] = queue.claim("w", job_types=["t"], lease=1)
    assert [r.id for r in queue.reap(now=t0 + timedelta(minutes=5))] == [lapsing.id]
    check("reaper return")
    queue.fire_schedule(Schedule("tick", "* * * * *", "cron"), now=t0)
    fired = queue.fire_schedule(Schedule("tick", "* * * * *", "cron"), now=t0 + timedelta(minutes=2))
    assert fired.enqueued
    check("schedule fire")
    # Dependencies (migration 22): a child waits outside the ring until its parent succeeds; a dead
    # parent cancels its waiting child, and retrying the parent makes the child wait again.
    queue.enqueue("parent", {})
    [parent] = queue.claim("w", job_types=["parent"])
    child = queue.enqueue("child", {}, after=[parent.id])
    check("enqueue waiting")
    queue.succeed(parent.lease, {"ok": True})
    assert queue.claim("w", job_types=["child"], limit=2)[0].id == child
    check("dependency released and claimed")
    queue.enqueue("parent", {})
    [doomed] = queue.claim("w", job_types=["parent"])
    orphan = queue.enqueue("child", {}, after=[doomed.id])
    queue.fail(doomed.lease, "fatal", retryable=False)
    check("parent dead, child cancelled")
    queue.retry([doomed.id])
    check("parent retried, child waiting again")
    [again] = queue.claim("w", job_types=["parent"])
    queue.succeed(again.lease, {"ok": True})
    [released] = queue.claim("w", job_types=["child"])
    assert released.id == orphan
    check("released after the retry")
    # A child with on_parent_failure="run" (migration 26): a dead parent releases it into the ring.
    queue.enqueue("parent", {})
    [failing] = queue.claim("w", job_types=["parent"])
    anyway = queue.enqueue("child", {}, after=[failing.id], on_parent_failure="run")
    queue.fail(failing.lease, "fatal", retryable=False)
    check("parent dead, child runs anyway")
    assert queue.claim("w", job_types=["child"])[0].id == anyway
    check("run-anyway child claimed")
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("UPDATE pgwork.jobs SET priority = 5 WHERE job_type = 'bulk' AND id % 7 = 0")
        check("priority changed")
        conn.execute("DELETE FROM pgwork.jobs WHERE job_type = 'bulk' AND id % 3 = 0")
        check("delete")
    thinned = queue.rotate_ready(now=t0 + timedelta(seconds=SEGMENT_SECONDS * 3))  # over 1,000 rows: thinned
    # (the bulk rows may straddle two 10 s periods: one segment thinned, the other thinned or truncated)
    assert ("thinned", 1000) in {(r.outcome, r.moved) for r in thinned}, thinned
    assert {r.outcome for r in thinned} <= {"thinned", "truncated"}, thinned
    check("rotate, thinned")
    rotated = queue.rotate_ready(now=t0 + timedelta(seconds=SEGMENT_SECONDS * 3), move_limit=10_000)
    assert {r.outcome for r in rotated} == {"truncated"}, rotated
    check("rotate")
    while queue.claim("w", limit=100, now=t0 + timedelta(hours=2)):
        pass
    check("drained")
    assert dict(steps)["drained"] == 0 and dict(steps)["enqueue_many by COPY"] > 1500, steps
    with psycopg.connect(dsn, autocommit=True) as conn:
        queue.enqueue("t", {"n": "last"})
        conn.execute("TRUNCATE pgwork.jobs CASCADE")
    check("truncate")


def test_a_stale_ready_row_is_dropped_by_the_claim_that_finds_it(queue: Queue, dsn: str) -> None:
    job_id = queue.enqueue("t", {})
    other = queue.enqueue("t", {})
    with psycopg.connect(dsn, autocommit=True) as conn:
        # A writer that bypasses the functions, with the trigger off: the ready row goes stale.
        conn.execute("ALTER TABLE pgwork.jobs DISABLE TRIGGER jobs_ready_changed")
        conn.execute("UPDATE pgwork.jobs SET status = 'cancelled', completed_at = now() WHERE id = %s", [job_id])
        conn.execute("ALTER TABLE pgwork.jobs ENABLE TRIGGER jobs_ready_changed")
    assert [c.id for c in queue.claim("w", limit=2)] == [other]
    ready_is_pending(dsn)


def test_a_segment_a_reader_holds_is_skipped_not_waited_for(queue: Queue, dsn: str) -> None:
    queue.enqueue("t", {})
    t0 = datetime.now(UTC)
    with psycopg.connect(dsn) as reader:
        reader.execute("SELECT count(*) FROM pgwork.ready").fetchone()  # ACCESS SHARE on every segment
        rotated = queue.rotate_ready(now=t0 + timedelta(seconds=SEGMENT_SECONDS * 4))
        assert [r.outcome for r in rotated] == ["busy"], rotated
    rotated = queue.rotate_ready(now=t0 + timedelta(seconds=SEGMENT_SECONDS * 4))
    assert [(r.outcome, r.moved) for r in rotated] == [("truncated", 1)], rotated
    assert queue.rotate_ready(now=t0 + timedelta(seconds=SEGMENT_SECONDS * 4)) == []  # nothing left to do
    ready_is_pending(dsn)


# -- the claim's cost under a held horizon ----------------------------------------------------------


@pytest.fixture
def held_horizon(dsn: str) -> Iterator[None]:
    """Case (b): a REPEATABLE READ transaction that read another table and stays open."""
    with psycopg.connect(dsn) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS public.report (n int)")
        conn.commit()
        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        conn.execute("SELECT count(*) FROM public.report").fetchone()
        yield
        conn.rollback()


def _churn(queue: Queue, n: int) -> None:
    for start in range(0, n, 500):
        queue.enqueue_many([NewJob("t", {"n": start + i}) for i in range(500)])
        while claimed := queue.claim("w", limit=100):
            queue.succeed_many([(c.lease, None) for c in claimed])


def _buffers(node: dict[str, Any]) -> int:
    return int(node.get("Shared Hit Blocks", 0)) + int(node.get("Shared Read Blocks", 0))


def _explain(dsn: str, statement: str, params: dict[str, Any]) -> int:
    """Buffers one execution of `statement` reads (EXPLAIN ANALYZE, rolled back)."""
    with (
        psycopg.connect(dsn) as conn,
        psycopg.ClientCursor(conn) as cur,
        conn.transaction(force_rollback=True),
    ):
        cur.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + statement, params)
        row = cur.fetchone()
    assert row is not None
    plan = row[0][0] if isinstance(row[0], list) else json.loads(row[0])[0]
    return _buffers(plan["Plan"])


# The claim as it was before migration 23: the first pending job by jobs_claim_idx (dropped by
# migration 24; built here again as the control).
OLD_CLAIM_INDEX = "CREATE INDEX jobs_claim_idx ON pgwork.jobs (priority, available_at, id) WHERE status = 'pending'"
OLD_CLAIM = """SELECT c.id FROM pgwork.jobs AS c WHERE c.status = 'pending' AND c.available_at <= now()
                ORDER BY c.priority, c.available_at, c.id LIMIT 1 FOR UPDATE SKIP LOCKED"""


def _costs(queue: Queue, dsn: str) -> tuple[int, int]:
    """(ring claim, old claim) buffers for one job waiting, after VACUUM did what it could."""
    queue.enqueue("t", {"probe": True})
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("VACUUM pgwork.jobs, pgwork.ready")
        text = claim_statement(conn, any_type=True)
    params = {"owner": "w", "job_types": None, "limit": 1, "lease": 30.0, "now": None}
    ring = _explain(dsn, text, params)
    old = _explain(dsn, OLD_CLAIM, {})
    [probe] = queue.claim("w")
    queue.succeed(probe.lease, None)
    return ring, old


@pytest.mark.slow
@pytest.mark.usefixtures("held_horizon")
def test_under_a_held_horizon_the_claim_stays_bounded_once_segments_rotate(queue: Queue, dsn: str) -> None:
    with psycopg.connect(dsn) as conn:
        conn.execute(OLD_CLAIM_INDEX)
    seen: list[tuple[int, int, int]] = []
    churned = 0
    for step in (1500, 1500, 1500):
        _churn(queue, step)
        churned += step
        # Rotation as time passes, twice (a later current segment each time): every segment the
        # churn wrote to is truncated, whichever the clock made current meanwhile.
        for shift in (3, 4):
            later = datetime.now(UTC) + timedelta(seconds=SEGMENT_SECONDS * shift)
            outcomes = {r.outcome for r in queue.rotate_ready(now=later)}
            assert outcomes <= {"truncated"}, outcomes
        ring, old = _costs(queue, dsn)
        seen.append((churned, ring, old))
    print("\njobs churned, buffers per claim (ring), buffers per claim (old jobs_claim_idx):", seen)
    rings = [r for _, r, _ in seen]
    olds = [o for _, _, o in seen]
    # The old claim walks every dead entry the held snapshot keeps: ~28 buffers per 1,000 jobs.
    assert olds[-1] > olds[0] + 40, seen
    # The ring's claim does not grow with the jobs churned (a few buffers of noise allowed).
    assert max(rings) - min(rings) <= 6, seen
    assert max(rings) < olds[-1], seen


def test_a_segment_holding_a_backlog_is_thinned_without_its_table_lock(queue: Queue, dsn: str) -> None:
    """Migration 25: a segment with more than move_limit rows is not locked (a claim beside the
    rotation never waits for it): over ten times that it is left for the claims to drain, else
    move_limit of its rows go forward each call, and once few enough are left it is truncated."""
    queue.enqueue_many([NewJob("t", {"n": n}) for n in range(25)])
    later = datetime.now(UTC) + timedelta(seconds=SEGMENT_SECONDS * 3)
    with psycopg.connect(dsn) as claimer:
        # A claim's lock on every segment, held open: a table lock would have to wait for it.
        claimer.execute("SELECT count(*) FROM pgwork.ready").fetchone()
        # Over ten times move_limit: a backlog, left alone (moving it would chase it round the ring).
        assert [(r.outcome, r.moved) for r in queue.rotate_ready(now=later, move_limit=2)] == [("full", 0)]
        first = queue.rotate_ready(now=later, move_limit=10)
        assert [(r.outcome, r.moved) for r in first] == [("thinned", 10)], first
        second = queue.rotate_ready(now=later, move_limit=10)
        assert [(r.outcome, r.moved) for r in second] == [("thinned", 10)], second
        third = queue.rotate_ready(now=later, move_limit=10)
        assert [r.outcome for r in third] == ["busy"], third  # 5 left: the table lock is wanted now
    ready_is_pending(dsn)
    last = queue.rotate_ready(now=later, move_limit=10)
    assert [(r.outcome, r.moved) for r in last] == [("truncated", 5)], last
    assert ready_is_pending(dsn) == 25
    assert len(queue.claim("w", limit=30)) == 25
