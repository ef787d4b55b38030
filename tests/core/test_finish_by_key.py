"""Migration 14: a fenced finish finds its job by primary key however many jobs are running (the
planner used to scan jobs_running_idx whole when the statistics saw few running), and a database
at version 13 with jobs in every state carries forward, its worker role still finishing."""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime

import psycopg
from psycopg import sql
from psycopg.types.json import Jsonb

from pgwork import sql_files
from pgwork.db import Queue, migrate
from pgwork.db.batches import DecidedFailure
from pgwork.failure import decide_failure
from pgwork.models import Completion, FailOutcome, Lease, NewJob
from pgwork.sql_files import latest_version
from tests.support.db import V1_JOBS, by_key, snapshot
from tests.support.plans import auto_explain_plans
from tests.support.versions import at_version

RUNNING = "11111111-1111-1111-1111-111111111111"


def _retry(lease: Lease, error: str = "boom") -> DecidedFailure:
    return DecidedFailure(lease, decide_failure(lease.attempt, 5, True, 30.0, datetime.now(UTC)), error)


def test_version_13_with_jobs_in_every_state_carries_forward_and_its_worker_still_finishes(empty_dsn: str) -> None:
    at_version(empty_dsn, 13)
    worker = f"pgwork_v13_worker_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(empty_dsn) as conn:
        conn.execute(V1_JOBS)
        conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(worker)))
        conn.execute("SELECT pgwork.grant_profiles(%s, ARRAY['worker'])", (worker,))
    try:
        before = snapshot(empty_dsn)
        ids = by_key(empty_dsn)
        assert migrate(empty_dsn) == list(range(14, latest_version() + 1))  # 14 and any later
        assert snapshot(empty_dsn) == before  # every row, every column
        # The role granted the worker profile at version 13 keeps its grants (CREATE OR REPLACE).
        with Queue(psycopg.conninfo.make_conninfo(empty_dsn, user=worker)) as q:
            held = Lease(ids["running"], uuid.UUID(RUNNING), "old-pod", 1, 5)
            forged = Lease(ids["stopping"], uuid.uuid4(), "old-pod", 1, 5)
            assert q.succeed_many([(forged, {"x": 1}), (held, {"done": "after 14"})]) == {
                ids["stopping"]: Completion.LEASE_LOST,
                ids["running"]: Completion.CREATED,
            }
            assert q.succeed(held, {"again": True}) is Completion.LEASE_LOST  # finished: the token is spent
            lapsed = Lease(ids["lapsed"], uuid.UUID("33333333-3333-3333-3333-333333333333"), "gone-pod", 1, 5)
            assert q.fail_many([_retry(forged)])[ids["stopping"]].outcome is FailOutcome.LEASE_LOST
            assert q.fail(lapsed, "after 14").outcome is FailOutcome.RETRY
            [job] = q.claim("new-pod", limit=1, job_types=["t"])
            assert q.succeed(job.lease, {"n": 1}) is Completion.CREATED
        with psycopg.connect(empty_dsn) as conn:
            stopping = conn.execute(
                "SELECT status::text, lease_token::text FROM pgwork.jobs WHERE id = %s", (ids["stopping"],)
            ).fetchone()
        assert stopping == ("running", "22222222-2222-2222-2222-222222222222")  # the forged token changed nothing
        # Version 13's rule survives the rewrite: a failure of a job whose cancel was requested ends it cancelled.
        with Queue(psycopg.conninfo.make_conninfo(empty_dsn, user=worker)) as q:
            asked = Lease(ids["stopping"], uuid.UUID("22222222-2222-2222-2222-222222222222"), "old-pod", 1, 5)
            assert q.fail(asked, "boom").outcome is FailOutcome.CANCELLED
    finally:
        with psycopg.connect(empty_dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(worker)))
            conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(worker)))


def test_a_finish_reads_its_job_by_primary_key_while_many_other_jobs_run(dsn: str) -> None:
    """The statistics see no job running (analysed while all were pending, as in any fresh queue),
    then 300 run: each fenced finish must still read only its own row. (In a table of a few
    hundred rows a sequential scan is the cheaper plan, and the planner rightly takes it.)"""
    with Queue(dsn) as q:
        q.enqueue_many([NewJob("t", {"n": i}) for i in range(10_000)])
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("ANALYZE pgwork.jobs")
        assert len(q.claim("other", limit=300, job_types=["t"], lease=3600)) == 300
        mine = q.claim("me", limit=4, job_types=["t"])
    with psycopg.connect(dsn, autocommit=True) as conn:
        plans = auto_explain_plans(conn)
        for repeat in range(2):  # the first call and a cached plan alike
            job = mine[repeat]
            conn.execute(
                sql_files.query("succeed_many"),
                {"ids": [job.id], "tokens": [job.lease.token], "results": [Jsonb({})], "now": None},
            )
        conn.execute(
            sql_files.query("succeed"),
            {"id": mine[2].id, "token": mine[2].lease.token, "result": Jsonb({}), "now": None},
        )
        conn.execute(
            sql_files.query("set_state_if_held"),
            {
                "id": mine[3].id,
                "token": mine[3].lease.token,
                "state": "pending",
                "reason": None,
                "retry_delay": 1.0,
                "error": "boom",
                "now": None,
            },
        )
    lookups = [p for p in plans if re.search(r"Query Text: (WITH|UPDATE|SELECT j\.attempt_count)", p)]
    assert len(lookups) == 5, plans  # two succeed_many, one succeed, set_state_if_held's SELECT and UPDATE
    for plan in lookups:
        assert "jobs_pkey" in plan and "jobs_running_idx" not in plan, plan
        removed = [int(n) for n in re.findall(r"Rows Removed by (?:Join )?Filter: (\d+)", plan)]
        assert all(n == 0 for n in removed), plan
