"""The batched-prune migration carries a database forward: every job intact, and a role that could
prune before (the reaper profile) prunes in batches after, without being granted again."""

from __future__ import annotations

import uuid
from datetime import timedelta

import psycopg
import pytest
from psycopg import sql

from pgwork import sql_files
from pgwork.db import Queue, migrate
from pgwork.models import PruneProgress
from pgwork.sql_files import latest_version
from tests.support.db import V1_JOBS, by_key, drop_roles, snapshot

MIGRATION = "batched_prune"


def _just_before(dsn: str, name: str) -> int:
    """Apply every migration before `name`, as `migrate` would; returns `name`'s version."""
    [target] = [m for m in sql_files.migrations() if m.name == name]
    with psycopg.connect(dsn) as conn:
        conn.execute(sql_files.query("migrate_bootstrap"))
        for m in sql_files.migrations():
            if m.version < target.version:
                conn.execute(m.sql)
                conn.execute(sql_files.query("migrate_record"), {"version": m.version, "name": m.name})
    return target.version


def test_a_database_with_jobs_in_every_state_migrates_and_its_reaper_prunes_in_batches(empty_dsn: str) -> None:
    version = _just_before(empty_dsn, MIGRATION)
    reaper, reader = (f"pgwork_pr_{kind}_{uuid.uuid4().hex[:8]}" for kind in ("reaper", "reader"))
    with psycopg.connect(empty_dsn) as conn:
        conn.execute(V1_JOBS)  # the columns are version 1's still: the same rows are every state
        for role, profile in ((reaper, "reaper"), (reader, "reader")):
            conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
            conn.execute("SELECT pgwork.grant_profiles(%s, ARRAY[%s])", (role, profile))
        # Old history to prune: finished a month ago.
        conn.execute(
            "UPDATE pgwork.jobs SET completed_at = now() - interval '30 days' WHERE status IN ('succeeded', 'dead')"
        )
    try:
        before = snapshot(empty_dsn)
        ids = by_key(empty_dsn)
        assert migrate(empty_dsn) == list(range(version, latest_version() + 1))
        assert snapshot(empty_dsn) == before  # every row, every column

        heard: list[PruneProgress] = []
        with Queue(psycopg.conninfo.make_conninfo(empty_dsn, user=reaper)) as q:
            assert q.prune(timedelta(days=7), statuses=["succeeded", "dead"], on_progress=heard.append) == 2
        assert [(p.status, p.deleted, p.total) for p in heard] == [("succeeded", 1, 1), ("dead", 1, 2)]
        left = set(by_key(empty_dsn))
        assert left == set(ids) - {"succeeded", "dead"}  # the cancelled job finished just now: kept

        with (
            Queue(psycopg.conninfo.make_conninfo(empty_dsn, user=reader)) as q,
            pytest.raises(psycopg.errors.InsufficientPrivilege),
        ):
            q.prune(timedelta(0), statuses=["cancelled"])
    finally:
        drop_roles(empty_dsn, [reaper, reader])


def test_batches_resume_where_the_last_stopped_and_stay_within_their_age(queue: Queue, dsn: str) -> None:
    with psycopg.connect(dsn) as conn:
        # 25 succeeded jobs finished at the same instant (succeed_many stamps a batch alike), 10 later
        # ones, and 5 too young to prune; 3 dead jobs, which succeeded/cancelled pruning never touches.
        conn.execute(
            """INSERT INTO pgwork.jobs (job_type, status, idempotency_key, completed_at)
               SELECT 't', 'succeeded'::pgwork.job_status, 'a' || g, now() - interval '40 days'
                 FROM generate_series(1, 25) AS g
               UNION ALL SELECT 't', 'succeeded', 'b' || g, now() - interval '20 days' + g * interval '1 s'
                 FROM generate_series(1, 10) AS g
               UNION ALL SELECT 't', 'succeeded', 'c' || g, now() - interval '1 day' FROM generate_series(1, 5) AS g
               UNION ALL SELECT 't', 'dead', 'd' || g, now() - interval '40 days' FROM generate_series(1, 3) AS g"""
        )
    heard: list[PruneProgress] = []
    assert queue.prune(timedelta(days=7), batch=4, on_progress=heard.append) == 35
    assert [p.deleted for p in heard] == [4] * 8 + [3, 0]  # succeeded in batches of 4; cancelled: none
    assert all(p.seconds < 5 for p in heard)
    with psycopg.connect(dsn) as conn:
        left = dict(conn.execute("SELECT left(idempotency_key, 1), count(*) FROM pgwork.jobs GROUP BY 1").fetchall())
    assert left == {"c": 5, "d": 3}


def test_prune_batch_refuses_what_is_not_history(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        for status, batch in (("pending", 10), ("running", 10), (None, 10), ("succeeded", 0), ("dead", 100_001)):
            with pytest.raises(psycopg.errors.InvalidParameterValue):
                conn.execute("SELECT * FROM pgwork.prune_batch(%s, 0, %s, NULL)", (status, batch))
