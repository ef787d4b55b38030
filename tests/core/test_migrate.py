"""Migrations: idempotent, safe under concurrency, refusing what pgwork cannot use."""

from __future__ import annotations

import multiprocessing
import uuid
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from psycopg import sql

from pgwork.db import Queue, grant, migrate
from pgwork.errors import EncodingRefused, NotMigrated, SchemaTooNew
from pgwork.models import Completion, FailOutcome, Lease, LeaseState
from pgwork.sql_files import latest_version
from tests.support.db import V1_JOBS, Databases, at_version_1, by_key, drop_roles, snapshot
from tests.support.versions import at_version


def test_migrate_is_idempotent(empty_dsn: str) -> None:
    assert migrate(empty_dsn) == list(range(1, latest_version() + 1))
    assert migrate(empty_dsn) == []
    with psycopg.connect(empty_dsn) as conn:
        rows = conn.execute("SELECT version FROM pgwork.schema_version ORDER BY version").fetchall()
    assert [r[0] for r in rows] == list(range(1, latest_version() + 1))


def _migrate_in_child(dsn: str, out: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    try:
        out.put(migrate(dsn))
    except Exception as exc:  # report, don't hang the parent
        out.put(repr(exc))


@pytest.mark.slow
def test_eight_processes_migrate_once(empty_dsn: str) -> None:
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=_migrate_in_child, args=(empty_dsn, out)) for _ in range(8)]
    for p in procs:
        p.start()
    results = [out.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(timeout=30)
    applied = [r for r in results if r]
    assert applied == [list(range(1, latest_version() + 1))], results  # exactly one applied; no errors
    assert sorted(results, key=len)[:7] == [[]] * 7


def test_sql_ascii_database_is_refused(databases: Databases) -> None:
    dsn = databases.create(encoding="SQL_ASCII")
    with pytest.raises(EncodingRefused) as info:
        migrate(dsn)
    message = str(info.value)
    assert "SQL_ASCII" in message and "UTF8" in message and "TEMPLATE template0" in message
    with psycopg.connect(dsn) as conn:  # nothing was created
        assert conn.execute("SELECT to_regnamespace('pgwork')").fetchone() == (None,)


def test_unmigrated_database_is_refused(empty_dsn: str) -> None:
    with pytest.raises(NotMigrated, match="pgwork migrate"):
        Queue(empty_dsn)


def test_newer_schema_is_refused(dsn: str) -> None:
    with psycopg.connect(dsn) as conn:
        conn.execute(
            "INSERT INTO pgwork.schema_version (version, name) VALUES (%s, 'from_the_future')", (latest_version() + 1,)
        )
    with pytest.raises(SchemaTooNew, match="upgrade pgwork"):
        Queue(dsn)
    with pytest.raises(SchemaTooNew):
        migrate(dsn)


def test_running_row_without_lease_is_impossible(dsn: str) -> None:
    with psycopg.connect(dsn) as conn, pytest.raises(psycopg.errors.CheckViolation):
        conn.execute("INSERT INTO pgwork.jobs (job_type, status, idempotency_key) VALUES ('x', 'running', 'k')")


# -- carrying a version-1 database forward -----------------------------------------------------

# Version 1's `pgwork grant` (pgwork/sql/grants.sql before migration 0002), as deployments ran it.
V1_GRANTS = {
    "reader": """GRANT USAGE ON SCHEMA pgwork TO {role};
                 GRANT SELECT ON ALL TABLES IN SCHEMA pgwork TO {role};
                 GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA pgwork TO {role};""",
    "worker": """GRANT INSERT ON pgwork.jobs TO {role};
                 GRANT UPDATE (status, started_at, completed_at, available_at, attempt_count, lease_owner,
                               lease_token, lease_expires_at, heartbeat_at, cancel_requested_at, last_error)
                       ON pgwork.jobs TO {role};
                 GRANT INSERT ON pgwork.job_results TO {role};""",
    "maintainer": """GRANT DELETE ON pgwork.jobs TO {role};
                     GRANT UPDATE (max_attempts) ON pgwork.jobs TO {role};""",
}
V1_PROFILES = ("reader", "worker", "maintainer")


def _v1_role(dsn: str, profile: str) -> str:
    role = f"pgwork_v1_{profile}_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(dsn) as conn:
        conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
        for block in V1_PROFILES[: V1_PROFILES.index(profile) + 1]:
            conn.execute(sql.SQL(V1_GRANTS[block]).format(role=sql.Identifier(role)))  # type: ignore[arg-type]
    return role


def test_version_1_database_with_jobs_in_every_state_migrates_intact_and_workable(empty_dsn: str) -> None:
    at_version_1(empty_dsn)
    with psycopg.connect(empty_dsn) as conn:
        conn.execute(V1_JOBS)
    before = snapshot(empty_dsn)
    ids = by_key(empty_dsn)
    assert migrate(empty_dsn) == list(range(2, latest_version() + 1))
    assert snapshot(empty_dsn) == before  # every row, every column

    with Queue(empty_dsn) as q:
        # The lease a version-1 worker held still fences, and still finishes its job.
        held = Lease(ids["running"], uuid.UUID("11111111-1111-1111-1111-111111111111"), "old-pod", 1)
        assert q.heartbeat(held) is LeaseState.HELD
        assert q.heartbeat(Lease(ids["running"], uuid.uuid4(), "old-pod", 1)) is LeaseState.LOST
        assert q.succeed(held, {"done": "after the upgrade"}) is Completion.CREATED
        stopping = Lease(ids["stopping"], uuid.UUID("22222222-2222-2222-2222-222222222222"), "old-pod", 1)
        assert q.heartbeat(stopping) is LeaseState.CANCEL_REQUESTED
        assert q.acknowledge_cancel(stopping) is True
        # The lapsed lease is reaped, attempts intact; ready and retrying jobs are claimed.
        [reaped] = q.reap()
        assert (reaped.id, reaped.attempt_count, reaped.status) == (ids["lapsed"], 1, "pending")
        claimed = {j.id: j for j in q.claim("new-pod", limit=10)}
        assert set(claimed) == {ids["ready"], ids["retrying"], ids["lapsed"]}
        assert claimed[ids["retrying"]].attempt == 3 and claimed[ids["lapsed"]].attempt == 2
        assert all(q.succeed(j.lease, {"n": j.id}) is Completion.CREATED for j in claimed.values())
        assert q.retry([ids["dead"]]) == [ids["dead"]]
        assert q.result("succeeded") is not None  # the version-1 result survives
        counts = {s.job_type: s for s in q.stats()}
        assert (counts["t"].ready, counts["t"].scheduled, counts["t"].running) == (1, 1, 0)


def test_version_1_roles_keep_working_without_their_direct_writes(empty_dsn: str) -> None:
    at_version_1(empty_dsn)
    roles = {p: _v1_role(empty_dsn, p) for p in V1_PROFILES}
    try:
        with psycopg.connect(empty_dsn) as conn:
            conn.execute(V1_JOBS)
        migrate(empty_dsn)
        as_role = {p: psycopg.conninfo.make_conninfo(empty_dsn, user=r) for p, r in roles.items()}
        # A version-1 worker also ran the reaper: it keeps both, and loses its direct writes.
        with Queue(as_role["worker"]) as q:
            [job] = q.claim("w")
            assert q.succeed(job.lease, {"ok": 1}) is Completion.CREATED
            assert [r.job_type for r in q.reap()] == ["t"]
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                q.retry([1])
        with Queue(as_role["maintainer"]) as q:
            assert q.claim("m") and q.prune(timedelta(days=1)) == 0
        with Queue(as_role["reader"]) as q:
            assert q.stats()
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                q.claim("r")
        for profile, url in as_role.items():
            with psycopg.connect(url, autocommit=True) as conn:
                for statement in (
                    "SELECT payload FROM pgwork.jobs",
                    "SELECT result FROM pgwork.job_results",
                    "UPDATE pgwork.jobs SET lease_owner = 'evil'",
                    "INSERT INTO pgwork.job_results (idempotency_key, job_id, job_type, produced_by, result) "
                    "VALUES ('x', 1, 't', 'evil', '{}')",
                ):
                    with pytest.raises(psycopg.errors.InsufficientPrivilege):
                        conn.execute(statement)  # type: ignore[arg-type]
            assert profile
    finally:
        drop_roles(empty_dsn, list(roles.values()))


def test_migrate_as_a_worker_is_a_no_op_when_current_and_one_line_when_behind(empty_dsn: str, dsn: str) -> None:
    role = f"pgwork_w_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
    at_version_1(empty_dsn)
    try:
        grant(dsn, role, "worker")
        # A worker pod's migrate init container: current schema, no DDL rights, success.
        assert migrate(psycopg.conninfo.make_conninfo(dsn, user=role)) == []
        # Behind (a version-1 worker role): refused in one line naming the fix, nothing changed.
        with psycopg.connect(empty_dsn) as conn:
            conn.execute(sql.SQL(V1_GRANTS["reader"] + V1_GRANTS["worker"]).format(role=sql.Identifier(role)))
        with pytest.raises(NotMigrated) as info:
            migrate(psycopg.conninfo.make_conninfo(empty_dsn, user=role))
        message = str(info.value)
        assert "version 1 of" in message and "cannot change the schema" in message
        assert "run `pgwork migrate` as the role that owns schema pgwork" in message and "\n" not in message
        with psycopg.connect(empty_dsn) as conn:
            assert conn.execute("SELECT max(version) FROM pgwork.schema_version").fetchone() == (1,)
    finally:
        with psycopg.connect(empty_dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(role)))
        drop_roles(dsn, [role])


def _at_version_2(dsn: str) -> None:
    at_version(dsn, 2)


def test_version_2_database_with_jobs_in_every_state_moves_to_the_guarded_fail(empty_dsn: str) -> None:
    _at_version_2(empty_dsn)
    worker = f"pgwork_v2_worker_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(empty_dsn) as conn:
        conn.execute(V1_JOBS)  # version 2 changed no column: the same rows are every state it can hold
        conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(worker)))
        conn.execute("SELECT pgwork.grant_profiles(%s, ARRAY['worker'])", (worker,))
    try:
        before = snapshot(empty_dsn)
        ids = by_key(empty_dsn)
        assert migrate(empty_dsn) == list(range(3, latest_version() + 1))
        assert snapshot(empty_dsn) == before  # every row, every column
        with psycopg.connect(empty_dsn) as conn:
            assert conn.execute(
                "SELECT to_regprocedure('pgwork.fail(bigint, uuid, text, float8, timestamptz)')"
            ).fetchone() == (None,)

        # The version-2 worker role kept its profile: it fails through the new function.
        as_worker = psycopg.conninfo.make_conninfo(empty_dsn, user=worker)
        with Queue(as_worker) as q:
            # The lease held across the upgrade retries (no budget on a hand-made lease: the database's).
            held = Lease(ids["running"], uuid.UUID("11111111-1111-1111-1111-111111111111"), "old-pod", 1)
            failed = q.fail(held, "after the upgrade", delay=30)
            assert failed.outcome is FailOutcome.RETRY and failed.available_at is not None
            stopping = Lease(ids["stopping"], uuid.UUID("22222222-2222-2222-2222-222222222222"), "old-pod", 1)
            # Its cancellation was requested before the upgrade: the failure ends it cancelled
            # (migration cancel_wins_over_failure), not dead, and the request is not lost.
            assert q.fail(stopping, "no good", retryable=False).outcome is FailOutcome.CANCELLED
            # A stale token, and a finished job, change nothing.
            assert q.fail(Lease(ids["lapsed"], uuid.uuid4(), "x", 1), "e").outcome is FailOutcome.LEASE_LOST
            [job] = [j for j in q.claim("new-pod", limit=10) if j.id == ids["retrying"]] or [None]
            assert job is not None and job.attempt == 3 and job.lease.max_attempts == 5
            assert q.fail(job.lease, "again").outcome is FailOutcome.RETRY
        after = {k: _row_status(empty_dsn, i) for k, i in ids.items()}
        assert after["running"] == ("pending", 1, "after the upgrade")
        assert after["stopping"][:2] == ("cancelled", 1)
        assert str(after["stopping"][2]).startswith("no good [cancellation requested at ")
        assert after["retrying"] == ("pending", 3, "again")
        assert {k: after[k][0] for k in ("succeeded", "dead", "cancelled", "scheduled")} == {
            "succeeded": "succeeded",
            "dead": "dead",
            "cancelled": "cancelled",
            "scheduled": "pending",
        }
    finally:
        drop_roles(empty_dsn, [worker])


def _row_status(dsn: str, job_id: int) -> tuple[Any, ...]:
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT status::text, attempt_count, last_error FROM pgwork.jobs WHERE id = %s", (job_id,))
        found = row.fetchone()
    assert found is not None
    return found


def _at_version_before_latest(dsn: str) -> int:
    """The schema as the release before the newest migration left it (no version number written
    here: the newest migration may be renumbered)."""
    previous = latest_version() - 1
    _at_version(dsn, previous)
    return previous


def test_previous_version_with_jobs_in_every_state_gains_the_typed_claim_and_the_bounded_backlog(
    empty_dsn: str,
) -> None:
    previous = _at_version_before_latest(empty_dsn)
    reader = f"pgwork_prev_reader_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(empty_dsn) as conn:
        conn.execute(V1_JOBS)  # no migration since version 1 changed a column: every state it can hold
        conn.execute(
            """INSERT INTO pgwork.jobs (job_type, payload, idempotency_key)
               SELECT 'u', '{}', 'u-' || g FROM generate_series(1, 30) AS g"""
        )
        conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(reader)))
        conn.execute("SELECT pgwork.grant_profiles(%s, ARRAY['reader'])", (reader,))
    try:
        before = snapshot(empty_dsn)
        ids = by_key(empty_dsn)
        assert migrate(empty_dsn) == list(range(previous + 1, latest_version() + 1))
        assert snapshot(empty_dsn) == before  # every row, every column

        # The reader granted before the upgrade reads the capped backlog without a new grant.
        with Queue(psycopg.conninfo.make_conninfo(empty_dsn, user=reader)) as q:
            stats = {s.job_type: s for s in q.stats(cap=10)}
        assert (stats["u"].ready, stats["u"].lower_bounds()) == (10, ("ready",))
        t = stats["t"]
        assert (t.ready, t.scheduled, t.retrying, t.running, t.dead, t.lower_bounds()) == (2, 1, 1, 3, 1, ())

        with Queue(empty_dsn) as q:
            # The lease held across the upgrade still fences and finishes.
            held = Lease(ids["running"], uuid.UUID("11111111-1111-1111-1111-111111111111"), "old-pod", 1)
            assert q.succeed(held, {"after": "upgrade"}) is Completion.CREATED
            # A typed claim takes t's ready jobs (the retry first: it is older), never u's.
            claimed = q.claim("new-pod", job_types=["t"], limit=10)
            assert sorted(j.id for j in claimed) == sorted([ids["ready"], ids["retrying"]])
            assert {j.id: j.attempt for j in claimed} == {ids["ready"]: 1, ids["retrying"]: 3}
            assert len(q.claim("new-pod", limit=100)) == 30  # the untyped claim: the rest
        with psycopg.connect(empty_dsn) as conn:
            indexes = {r[0] for r in conn.execute("SELECT indexname FROM pg_indexes WHERE tablename = 'jobs'")}
        assert {"jobs_pending_due_idx", "jobs_dead_type_idx"} <= indexes
        # Built by version 7, dropped by 24 once the claim read the ready ring (23).
        assert not {"jobs_claim_idx", "jobs_claim_type_idx"} & indexes
    finally:
        drop_roles(empty_dsn, [reader])


def _at_version(dsn: str, version: int) -> None:
    """A database migrated by hand to `version` exactly, as an older pgwork left it."""
    at_version(dsn, version)


def test_version_3_database_moves_to_hot_heartbeats_with_every_job_intact(empty_dsn: str) -> None:
    _at_version(empty_dsn, 3)
    with psycopg.connect(empty_dsn) as conn:
        conn.execute(V1_JOBS)
        assert conn.execute("SELECT to_regclass('pgwork.jobs_lease_idx')").fetchone() != (None,)
    before = snapshot(empty_dsn)
    ids = by_key(empty_dsn)
    assert migrate(empty_dsn)[0] == 4
    assert snapshot(empty_dsn) == before
    with psycopg.connect(empty_dsn) as conn:
        assert conn.execute("SELECT to_regclass('pgwork.jobs_lease_idx')").fetchone() == (None,)
    with Queue(empty_dsn) as q:
        # The lease held across the upgrade renews; the lapsed one is reaped through the new index.
        held = Lease(ids["running"], uuid.UUID("11111111-1111-1111-1111-111111111111"), "old-pod", 1)
        assert q.heartbeat(held).name == "HELD"
        assert [r.id for r in q.reap()] == [ids["lapsed"]]
