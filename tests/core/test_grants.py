"""Least privilege: each profile can do its own job-life transitions and nothing more, and every
hostile attempt by a granted role is refused or changes nothing."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from psycopg import sql
from psycopg.rows import dict_row

from pgwork.db import GRANT_PROFILES, Queue, check_grantee, grant, new_token
from pgwork.errors import InvalidArgument
from pgwork.models import Completion, FailOutcome, LeaseState, NewJob
from pgwork.operator.db import QueueCache, jobs_by_owner
from tests.support.db import MakeRole

Denied = psycopg.errors.InsufficientPrivilege


def _row(dsn: str, job_id: int) -> dict[str, Any]:
    with psycopg.connect(dsn, row_factory=dict_row) as conn:
        row = conn.execute("SELECT * FROM pgwork.jobs WHERE id = %s", (job_id,)).fetchone()
    assert row is not None
    return row


def _count(dsn: str, query: str) -> int:
    with psycopg.connect(dsn) as conn:
        row = conn.execute(query).fetchone()  # type: ignore[arg-type]
    assert row is not None
    return int(row[0])


def _refused(dsn: str, statement: str, params: tuple[Any, ...] = ()) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn, pytest.raises(Denied):
        conn.execute(statement, params)  # type: ignore[arg-type]


# -- the profiles ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("profile", "applied"),
    [
        ("reader", ["reader"]),
        ("producer", ["reader", "producer"]),
        ("worker", ["reader", "producer", "worker"]),
        ("reaper", ["reader", "reaper"]),
        ("maintainer", ["reader", "reaper", "maintainer"]),
    ],
)
def test_each_profile_includes_what_it_says(dsn: str, make_role: MakeRole, profile: str, applied: list[str]) -> None:
    role = str(psycopg.conninfo.conninfo_to_dict(make_role())["user"])
    assert grant(dsn, role, profile) == applied
    assert set(GRANT_PROFILES) >= set(applied)


def test_worker_profile_runs_the_life_and_nothing_else(dsn: str, make_role: MakeRole) -> None:
    worker = make_role("worker")
    with Queue(dsn) as owner:
        cancel_me = owner.enqueue("ocr", {"doc": 0}, priority=0)
    with Queue(worker) as q:
        q.enqueue("ocr", {"doc": 1}, key="d1")
        q.enqueue("ocr", {"doc": 2}, max_attempts=1)
        q.enqueue_many([NewJob("ocr", {"doc": 3}), NewJob("ocr", {"doc": 4})])
        c, a, b = q.claim("w", limit=3, lease=5)
        assert c.id == cancel_me
        assert q.heartbeat(a.lease) is LeaseState.HELD
        assert q.succeed(a.lease, {"ok": True}) is Completion.CREATED
        assert q.fail(b.lease, "boom").outcome is FailOutcome.DEAD
        d, e = q.claim("w", limit=2)
        assert q.succeed_many([(d.lease, 1)]) == {d.id: Completion.CREATED}
        assert q.release(e.lease) is True
        with Queue(dsn) as owner:
            owner.cancel([c.id])
        assert q.heartbeat(c.lease) is LeaseState.CANCEL_REQUESTED
        assert q.acknowledge_cancel(c.lease) is True
        assert q.stats() and q.dead() and q.running() == [] and q.retrying()
        # Not the reaper's, the maintainer's nor the owner's work.
        for call in (
            q.reap,
            lambda: q.prune(timedelta(0)),
            lambda: q.retry([b.id]),
            lambda: q.cancel([e.id]),
            lambda: q.job(a.id),
            lambda: q.result("d1"),
        ):
            with pytest.raises(Denied):
                call()
    _refused(worker, "DROP TABLE pgwork.job_results")


def test_reader_sees_the_operator_questions_and_no_payload(dsn: str, make_role: MakeRole) -> None:
    reader = make_role("reader")
    with Queue(dsn) as owner:
        owner.enqueue_many([NewJob("ocr", {"ssn": "123-45-6789"}) for _ in range(3)])
        owner.enqueue("mail", {"to": "someone@example.com"}, max_attempts=1)
        [held] = owner.claim("pod-a", job_types=["ocr"])
        [mail] = owner.claim("pod-b", job_types=["mail"])
        owner.fail(mail.lease, "smtp said no")
    with Queue(reader) as q:
        by_type = {s.job_type: s for s in q.stats()}
        assert (by_type["ocr"].ready, by_type["ocr"].running, by_type["mail"].dead) == (2, 1, 1)
        [running] = q.running()
        assert (running.id, running.lease_owner) == (held.id, "pod-a")
        [dead] = q.dead()
        assert (dead.id, dead.last_error) == (mail.id, "smtp said no")
        assert q.running_by_owner() == {"pod-a": 1}
        for call in (
            lambda: q.enqueue("ocr", {}),
            lambda: q.claim("w"),
            lambda: q.heartbeat(held.lease),
            lambda: q.job(held.id),
        ):
            with pytest.raises(Denied):
                call()
    # The operator's poll works under the reader profile.
    cache = QueueCache()
    try:
        queue = cache.get(("ns", "jq"), reader)
        figures = cache.backlog(reader, queue, ["ocr", "mail"], now=0.0, max_age=5.0)
        assert (figures.ready, figures.running, figures.dead) == (2, 1, 1)
        assert jobs_by_owner(queue, ["ocr"]) == {"pod-a": 1}
    finally:
        cache.close_all()
    for statement in (
        "SELECT payload FROM pgwork.jobs",
        "SELECT id FROM pgwork.jobs",
        "SELECT * FROM pgwork.job_results",
        "SELECT lease_token FROM pgwork.jobs",
        "COPY pgwork.jobs TO STDOUT",
    ):
        _refused(reader, statement)
    # The views and functions it may read name no payload, result or token column.
    with psycopg.connect(reader) as conn:
        for view in ("stats", "running", "retrying", "dead"):
            cur = conn.execute(sql.SQL("SELECT * FROM pgwork.{} LIMIT 0").format(sql.Identifier(view)))
            columns = {c.name for c in cur.description or []}
            assert not columns & {"payload", "result", "lease_token", "trace_context", "idempotency_key"}, view


def test_producer_enqueues_pending_jobs_only(dsn: str, make_role: MakeRole) -> None:
    producer = make_role("producer")
    with Queue(producer) as q:
        job_id = q.enqueue("ocr", {"doc": 1})
        with pytest.raises(Denied):
            q.claim("w")
    # Plain SQL enqueue (another service's INSERT) stays open, for the columns that say what a job is.
    with psycopg.connect(producer, autocommit=True) as conn:
        conn.execute("INSERT INTO pgwork.jobs (job_type, payload, idempotency_key) VALUES ('ocr', '{}', 'plain')")
    for statement in (
        # A row that starts running under a lease the producer knows, or already succeeded.
        "INSERT INTO pgwork.jobs (job_type, idempotency_key, status, lease_owner, lease_token, lease_expires_at) "
        "VALUES ('ocr', 'k', 'running', 'evil', '00000000-0000-0000-0000-000000000001', now() + interval '1h')",
        "INSERT INTO pgwork.jobs (job_type, idempotency_key, status, completed_at) "
        "VALUES ('ocr', 'k2', 'succeeded', now())",
        "INSERT INTO pgwork.jobs (job_type, idempotency_key, attempt_count) VALUES ('ocr', 'k3', 3)",
    ):
        _refused(producer, statement)
    assert _row(dsn, job_id)["status"] == "pending"
    assert _count(dsn, "SELECT count(*) FROM pgwork.jobs WHERE status <> 'pending'") == 0


def test_reaper_reaps_and_prunes_history_only(dsn: str, make_role: MakeRole) -> None:
    reaper = make_role("reaper")
    with Queue(dsn) as owner:
        owner.enqueue_many([NewJob("ocr", {"n": i}) for i in range(3)])
        [lapsed] = owner.claim("pod-a", lease=0.01)
        [done] = owner.claim("pod-a")
        owner.succeed(done.lease, {"ok": True}, now=datetime.now(UTC) - timedelta(days=40))
    assert _reap_until(reaper, lapsed.id)
    with Queue(reaper) as q:
        # The clock is the server's: a reaper cannot reap live leases by claiming it is later.
        with pytest.raises(Denied, match="only the owner"):
            q.reap(now=datetime.now(UTC) + timedelta(days=1))
        with pytest.raises(Denied):
            q.claim("w")
        with pytest.raises(Denied):
            q.retry([done.id])
        assert q.prune(timedelta(days=30)) == 1
    # Pending (and running) jobs are not history, whatever the caller asks.
    with psycopg.connect(reaper, autocommit=True) as conn:
        row = conn.execute("SELECT pgwork.prune(ARRAY['pending', 'running'], 0, 1000)").fetchone()
    assert row == (0,)
    assert _count(dsn, "SELECT count(*) FROM pgwork.jobs") == 2


def _reap_until(dsn: str, job_id: int, timeout: float = 10.0) -> bool:
    """Reap (the server's clock) until `job_id` comes back; the lease was 10 ms long."""
    deadline = datetime.now(UTC) + timedelta(seconds=timeout)
    with Queue(dsn) as q:
        while datetime.now(UTC) < deadline:
            if any(r.id == job_id for r in q.reap()):
                return True
    return False


def test_maintainer_retries_cancels_and_prunes(dsn: str, make_role: MakeRole) -> None:
    maintainer = make_role("maintainer")
    with Queue(dsn) as owner:
        dead_id = owner.enqueue("ocr", {"n": 1}, max_attempts=1)
        pending_id = owner.enqueue("ocr", {"n": 2}, priority=200)
        [job] = owner.claim("w")
        owner.fail(job.lease, "boom")
    with Queue(maintainer) as q:
        assert q.retry([dead_id], max_attempts=3) == [dead_id]
        assert q.cancel([pending_id]).cancelled == [pending_id]
        assert q.prune(timedelta(days=1)) == 0
        assert q.reap() == []
        with pytest.raises(Denied):
            q.claim("w")
    assert _row(dsn, dead_id)["max_attempts"] == 3


# -- hostile: a worker-profile role trying to reach past its own lease ------------------------


def test_a_worker_cannot_touch_another_workers_job(dsn: str, make_role: MakeRole) -> None:
    worker = make_role("worker")
    with Queue(dsn) as owner:
        owner.enqueue_many([NewJob("ocr", {"n": i}, key=f"k{i}") for i in range(3)])
        [theirs] = owner.claim("honest-pod", lease=300)
    unclaimed = theirs.id + 1
    before = {i: _row(dsn, i) for i in (theirs.id, unclaimed)}
    token = str(new_token())
    for statement, params in (
        # Hijack the other worker's lease; mark their job, or one nobody claimed, succeeded.
        ("UPDATE pgwork.jobs SET lease_token = %s, lease_owner = 'evil' WHERE id = %s", (token, theirs.id)),
        ("UPDATE pgwork.jobs SET status = 'succeeded', completed_at = now() WHERE id = %s", (unclaimed,)),
        ("UPDATE pgwork.jobs SET attempt_count = 0 WHERE id = %s", (theirs.id,)),
        ("UPDATE pgwork.jobs SET available_at = now() + interval '1 year'", ()),
        ("DELETE FROM pgwork.jobs WHERE id = %s", (unclaimed,)),
        ("TRUNCATE pgwork.jobs", ()),
        # Write a result for a job nobody claimed (so its real result would be dropped later).
        (
            "INSERT INTO pgwork.job_results (idempotency_key, job_id, job_type, produced_by, result) "
            "VALUES ('k1', %s, 'ocr', 'evil', '{}')",
            (unclaimed,),
        ),
        # Learn the other worker's token, to use the functions with it.
        ("SELECT lease_token FROM pgwork.jobs WHERE id = %s", (theirs.id,)),
        ("SELECT id FROM pgwork.jobs WHERE lease_owner = 'honest-pod'", ()),
        ("SELECT * FROM pgwork.running_jobs() AS r JOIN pgwork.jobs AS j USING (id)", ()),
    ):
        _refused(worker, statement, params)

    # The functions with a wrong token change nothing.
    stale = type(theirs.lease)(theirs.id, new_token(), "evil", theirs.lease.attempt)
    with Queue(worker) as q:
        assert q.heartbeat(stale, lease_seconds=3600) is LeaseState.LOST
        assert q.succeed(stale, {"forged": True}) is Completion.LEASE_LOST
        assert q.succeed_many([(stale, {"forged": True})]) == {theirs.id: Completion.LEASE_LOST}
        assert q.fail(stale, "forged", retryable=False).outcome is FailOutcome.LEASE_LOST
        assert q.release(stale) is False
        assert q.acknowledge_cancel(stale) is False
    with psycopg.connect(worker, autocommit=True) as conn:
        for statement in (
            "SELECT * FROM pgwork.succeed(%s, NULL, '{}')",
            "SELECT * FROM pgwork.set_state_if_held(%s, NULL, 'dead', 'not_retryable', NULL, 'x')",
            "SELECT * FROM pgwork.release(%s, NULL, 'x')",
        ):
            assert conn.execute(statement, (unclaimed,)).fetchall() in ([], [(0, 0)])  # type: ignore[arg-type]
    assert {i: _row(dsn, i) for i in (theirs.id, unclaimed)} == before
    assert _count(dsn, "SELECT count(*) FROM pgwork.job_results") == 0


def test_a_worker_cannot_move_the_clock(dsn: str, make_role: MakeRole) -> None:
    worker = make_role("worker")
    with Queue(dsn) as owner:
        later = owner.enqueue("ocr", {"n": 1}, delay=3600)
    with Queue(worker) as q:
        # Claiming "an hour from now" would take the job before its time.
        with pytest.raises(Denied, match="only the owner"):
            q.claim("w", now=datetime.now(UTC) + timedelta(hours=2))
        assert q.claim("w") == []
    assert _row(dsn, later)["status"] == "pending"


def test_a_worker_cannot_call_what_it_was_not_granted(dsn: str, make_role: MakeRole) -> None:
    worker = make_role("worker")
    for statement in (
        "SELECT * FROM pgwork.reap(1000)",
        "SELECT pgwork.prune(ARRAY['succeeded'], 0, 1000)",
        "SELECT * FROM pgwork.retry(ARRAY[1]::bigint[], 100::smallint)",
        "SELECT * FROM pgwork.cancel(ARRAY[1]::bigint[])",
        "SELECT pgwork.clock(now())",
        "SELECT pgwork.grant_profiles(current_user, ARRAY['maintainer'])",
        "CREATE FUNCTION pgwork.mine() RETURNS int LANGUAGE sql AS 'SELECT 1'",
        "CREATE TABLE pgwork.mine (x int)",
        "CREATE OR REPLACE FUNCTION pgwork.claim(owner text, job_types text[], max_jobs integer, "
        "lease_seconds double precision, at timestamptz DEFAULT NULL) RETURNS SETOF pgwork.jobs "
        "LANGUAGE sql AS 'SELECT * FROM pgwork.jobs'",
        "ALTER FUNCTION pgwork.claim(text, text[], integer, double precision, timestamptz) SECURITY INVOKER",
        "GRANT EXECUTE ON FUNCTION pgwork.reap(integer, timestamptz) TO PUBLIC",
        "INSERT INTO pgwork.schema_version (version, name) VALUES (99, 'x')",
    ):
        refused = (Denied, psycopg.errors.UndefinedFunction)
        with psycopg.connect(worker, autocommit=True) as conn, pytest.raises(refused):
            conn.execute(statement)  # type: ignore[arg-type]


def test_search_path_hijack_changes_nothing(dsn: str, make_role: MakeRole) -> None:
    """A role puts its own now(), gen_random_uuid(), `=` operator and tables named like pgwork's
    first on its search_path (its own schema, and pg_temp): the functions never use them."""
    worker = make_role("worker")
    role = str(psycopg.conninfo.conninfo_to_dict(worker)["user"])
    schema = f"evil_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {} AUTHORIZATION {}").format(sql.Identifier(schema), sql.Identifier(role)))
    with Queue(dsn) as owner:
        job_id = owner.enqueue("ocr", {"n": 1})
    fixed = "00000000-0000-0000-0000-00000000beef"
    with psycopg.connect(worker, autocommit=True) as conn:
        s = sql.Identifier(schema)
        for statement in (
            "CREATE TABLE {s}.calls (what text)",
            "CREATE TABLE {s}.jobs (id bigint, job_type text, status text, lease_token uuid)",
            "CREATE FUNCTION {s}.now() RETURNS timestamptz LANGUAGE plpgsql AS "
            "$$ BEGIN INSERT INTO {s}.calls VALUES ('now'); RETURN '2000-01-01'; END $$",
            "CREATE FUNCTION {s}.gen_random_uuid() RETURNS uuid LANGUAGE plpgsql AS "
            "$$ BEGIN INSERT INTO {s}.calls VALUES ('uuid'); RETURN '" + fixed + "'; END $$",
            "CREATE FUNCTION {s}.same(bigint, bigint) RETURNS boolean LANGUAGE plpgsql AS "
            "$$ BEGIN INSERT INTO {s}.calls VALUES ('='); RETURN true; END $$",
            "CREATE OPERATOR {s}.= (LEFTARG = bigint, RIGHTARG = bigint, FUNCTION = {s}.same)",
            "CREATE TEMP TABLE jobs (id bigint, job_type text, status text, lease_token uuid)",
            "CREATE TEMP TABLE job_results (idempotency_key text)",
            "CREATE FUNCTION pg_temp.gen_random_uuid() RETURNS uuid LANGUAGE sql AS $$ SELECT '" + fixed + "'::uuid $$",
        ):
            conn.execute(sql.SQL(statement).format(s=s))  # type: ignore[arg-type]
        # Theirs first, pg_catalog after (it is searched first only when not named).
        conn.execute(sql.SQL("SET search_path = {}, pg_temp, pg_catalog, pgwork").format(s))
        claimed = conn.execute(
            "SELECT id, lease_token, lease_expires_at FROM pgwork.claim('w', NULL, 1, 60)"
        ).fetchone()
        assert claimed is not None and claimed[0] == job_id and str(claimed[1]) != fixed
        assert claimed[2] > datetime.now(UTC)
        beat = "SELECT * FROM pgwork.heartbeat(ARRAY[%s]::bigint[], ARRAY[%s]::uuid[], 60)"
        assert conn.execute(beat, claimed[:2]).fetchall()
        assert conn.execute("SELECT * FROM pgwork.succeed(%s, %s, '{\"ok\": 1}')", claimed[:2]).fetchone() == (1, 1)
        conn.execute("SELECT * FROM pgwork.queue_stats()")
        conn.execute("INSERT INTO pgwork.jobs (job_type, idempotency_key) VALUES ('ocr', 'after')")
        calls = conn.execute(sql.SQL("SELECT count(*) FROM {}.calls").format(s)).fetchone()
        assert calls == (0,)
    row = _row(dsn, job_id)
    assert row["status"] == "succeeded" and row["completed_at"].year > 2000
    with psycopg.connect(dsn) as conn:
        conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))


def test_every_pgwork_function_is_closed_to_public_and_pins_its_search_path_and_jit(dsn: str) -> None:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            """SELECT p.proname, p.prosecdef, p.proconfig, p.proacl IS NULL AS default_acl,
                      coalesce((SELECT bool_or(a.grantee = 0) FROM aclexplode(p.proacl) AS a), false) AS public
                 FROM pg_proc AS p WHERE p.pronamespace = 'pgwork'::regnamespace"""
        ).fetchall()
    assert len(rows) >= 15
    for name, definer, config, default_acl, public in rows:
        # A NULL acl is the default: EXECUTE for PUBLIC.
        assert not default_acl and not public, name
        assert config and "search_path=pg_catalog, pgwork, pg_temp" in config, name
        # Migration 29: a backlog's estimate must not make a statement compile (test_no_jit.py).
        assert "jit=off" in config, name
        # The owner's own tools (granting, the profiles' closure) run as the owner calling them.
        owners_only = ("grant_profiles", "profile_closure", "add_profile_privilege", "drop_profile_privilege")
        if name not in ("clock", "ready_segment", "notify_jobs", "notify_finished", *owners_only):
            assert definer, name


# -- who `pgwork grant` grants to -------------------------------------------------------------


@pytest.mark.parametrize(
    ("role", "words"),
    [
        ("public", "PUBLIC means every role"),
        ("PUBLIC", "PUBLIC means every role"),
        ('"public"', "quoted"),
        ('"pgwork_worker"', "quoted"),
        ("", "is empty"),
        ("   ", "is empty"),
        ("a" * 64, "64 bytes"),
        ("é" * 32, "64 bytes"),
        ("pg_monitor", "reserved pg_*"),
        ("pg_read_all_data", "reserved pg_*"),
        ("bad\nname", "control character"),
        ("\ud800", "not valid text"),
    ],
)
def test_check_grantee_refuses(role: str, words: str) -> None:
    with pytest.raises(InvalidArgument, match=r"^role: ") as info:
        check_grantee(role)
    assert words in str(info.value) and "\n" not in str(info.value)


def test_grant_refuses_roles_it_cannot_narrow(dsn: str, make_role: MakeRole) -> None:
    with pytest.raises(InvalidArgument, match="there is no role"):
        grant(dsn, f"nobody_{uuid.uuid4().hex[:8]}", "worker")
    with pytest.raises(InvalidArgument, match="superuser"):
        grant(dsn, "postgres", "worker")
    with pytest.raises(InvalidArgument, match="profile"):
        grant(dsn, "someone", "admin")


def test_a_name_past_63_bytes_never_lands_on_the_role_it_truncates_to(dsn: str, make_role: MakeRole) -> None:
    target = "t" + uuid.uuid4().hex + "x" * 30  # 63 bytes
    make_role(name=target)
    with pytest.raises(InvalidArgument, match="63"):
        grant(dsn, target + "y", "maintainer")
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT has_schema_privilege(%s, 'pgwork', 'USAGE')", (target,)).fetchone()
    assert row == (False,)


def test_grant_sets_exactly_the_profile(dsn: str, make_role: MakeRole) -> None:
    """Granting is also narrowing: what the new profile lacks is revoked, leftovers included."""
    worker = make_role("worker")
    role = str(psycopg.conninfo.conninfo_to_dict(worker)["user"])
    with psycopg.connect(dsn) as conn:
        conn.execute(sql.SQL("GRANT UPDATE ON pgwork.jobs TO {}").format(sql.Identifier(role)))
    assert grant(dsn, role, "reader") == ["reader"]
    with Queue(worker) as q:
        with pytest.raises(Denied):
            q.claim("w")
        assert q.stats() == []
    _refused(worker, "UPDATE pgwork.jobs SET status = 'dead'")
