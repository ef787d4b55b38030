"""A lease renewed per worker (migration 0015): one row renewed for all the jobs a registration
covers, the reaper and the readers on the effective expiry, and fencing exactly as strong as
the per-claim token made it. Times are passed (`now`), never slept; on the real PostgreSQL."""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from psycopg import sql

from pgwork.db import Queue, migrate
from pgwork.errors import InvalidArgument
from pgwork.models import ClaimedJob, Completion, Lease, LeaseState, WorkerLease
from pgwork.progress import Progress
from pgwork.sql_files import latest_version
from tests.support.db import V1_JOBS, MakeRole, by_key, snapshot
from tests.support.plans import plan_nodes
from tests.support.versions import at_version

T0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
LEASE = 30.0

COUNTERS = """
SELECT pg_stat_get_xact_tuples_updated('pgwork.jobs'::regclass),
       pg_stat_get_xact_tuples_updated('pgwork.worker_leases'::regclass),
       pg_stat_get_xact_tuples_hot_updated('pgwork.worker_leases'::regclass)
"""


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def _claim(queue: Queue, owner: str, n: int, seconds: float = 0.0) -> list[ClaimedJob]:
    for i in range(n):
        queue.enqueue("wl", {"i": i, "owner": owner, "s": seconds}, available_at=T0 - timedelta(minutes=1))
    claimed = queue.claim(owner, job_types=["wl"], limit=n, lease=LEASE, now=at(seconds))
    assert len(claimed) == n
    return claimed


def _reaped(queue: Queue, seconds: float) -> list[int]:
    return sorted(r.id for r in queue.reap(now=at(seconds)))


def _registered(queue: Queue, owner: str, seconds: float = 0.0) -> WorkerLease:
    return queue.register_worker(owner, lease_seconds=LEASE, now=at(seconds))


# -- covered jobs live on the worker's row ----------------------------------------------------


def test_a_covered_job_outlives_its_own_lease_while_its_worker_renews_and_is_reaped_after(queue: Queue) -> None:
    worker = _registered(queue, "pod-a")
    jobs = _claim(queue, "pod-a", 3, seconds=1)
    leases = [j.lease for j in jobs]
    # The first renewal adopts each job (its row renewed once, to 50 s); the later ones leave the rows alone.
    for s in (20, 40, 60, 80):
        renewal = queue.renew(leases, lease_seconds=LEASE, worker=worker, now=at(s))
        assert renewal.registered is True
        assert renewal.states == {j.id: LeaseState.HELD for j in jobs}
        assert _reaped(queue, s + 5) == []
    with psycopg.connect(queue.dsn) as conn:
        own = {r[0] for r in conn.execute("SELECT lease_expires_at FROM pgwork.jobs WHERE status = 'running'")}
    assert own == {at(50)}  # the adopting renewal's; the jobs lived past it on the worker's row
    # The worker stops renewing (killed): its last lease ran to 110 s.
    assert _reaped(queue, 109) == []
    assert _reaped(queue, 111) == sorted(j.id for j in jobs)
    assert _reaped(queue, 112) == []


def test_the_reaper_says_how_overdue_the_effective_lease_is(queue: Queue) -> None:
    worker = _registered(queue, "pod-a")
    [job] = _claim(queue, "pod-a", 1)
    queue.renew([job.lease], lease_seconds=LEASE, worker=worker, now=at(50))  # worker lease to 80 s
    [reaped] = queue.reap(now=at(90))
    assert (reaped.id, reaped.previous_owner) == (job.id, "pod-a")
    assert reaped.overdue_seconds == pytest.approx(10.0)


def test_one_heartbeat_writes_one_row_for_every_covered_job(queue: Queue) -> None:
    worker = _registered(queue, "pod-a")
    jobs = _claim(queue, "pod-a", 40)
    queue.renew([j.lease for j in jobs], lease_seconds=LEASE, worker=worker, now=at(5))  # adopts them
    with psycopg.connect(queue.dsn) as conn:
        renewal = queue.renew([j.lease for j in jobs], lease_seconds=LEASE, worker=worker, now=at(10), conn=conn)
        row = conn.execute(COUNTERS).fetchone()
        conn.commit()
    assert renewal.registered is True and set(renewal.states.values()) == {LeaseState.HELD}
    assert row == (0, 1, 1)  # no job row; the worker's row, as a HOT update


def test_a_worker_with_nothing_to_renew_sends_nothing(queue: Queue) -> None:
    assert queue.renew([], lease_seconds=LEASE).states == {}
    worker = _registered(queue, "pod-a")
    assert queue.renew([], lease_seconds=LEASE, worker=worker, now=at(5)).registered is True


def test_the_first_renewal_adopts_each_job_once_even_one_claimed_before_the_registration(queue: Queue) -> None:
    early = _claim(queue, "pod-a", 2)
    worker = _registered(queue, "pod-a", seconds=5)
    late = _claim(queue, "pod-a", 2, seconds=6)
    leases = [j.lease for j in early + late]
    counted = []
    for s in (20, 30):
        with psycopg.connect(queue.dsn) as conn:
            renewal = queue.renew(leases, lease_seconds=LEASE, worker=worker, now=at(s), conn=conn)
            counted.append(conn.execute(COUNTERS).fetchone())
            conn.commit()
        assert set(renewal.states.values()) == {LeaseState.HELD}
    assert counted == [(4, 1, 1), (0, 1, 1)]  # each job's row once (the holder passed its token), then none


def test_a_caller_without_a_worker_lease_renews_as_before(queue: Queue) -> None:
    _registered(queue, "pod-a")
    jobs = _claim(queue, "pod-a", 2)
    assert queue.heartbeat_many([j.lease for j in jobs], lease_seconds=LEASE, now=at(25)) == {
        j.id: LeaseState.HELD for j in jobs
    }
    assert _reaped(queue, 50) == []  # renewed by their own rows to 55 s
    assert _reaped(queue, 56) == sorted(j.id for j in jobs)


def test_progress_on_a_covered_job_is_stored_with_its_row(queue: Queue) -> None:
    worker = _registered(queue, "pod-a")
    a, b = _claim(queue, "pod-a", 2)
    queue.renew([a.lease, b.lease], lease_seconds=LEASE, worker=worker, now=at(5))  # adopts them
    with psycopg.connect(queue.dsn) as conn:
        renewal = queue.renew(
            [a.lease, b.lease],
            lease_seconds=LEASE,
            worker=worker,
            now=at(10),
            conn=conn,
            progress={a.id: Progress(0.25, "page 1 of 4")},
        )
        row = conn.execute(COUNTERS).fetchone()
        conn.commit()
    assert renewal.states == {a.id: LeaseState.HELD, b.id: LeaseState.HELD}
    assert row == (1, 1, 1)
    stored = queue.job(a.id)
    assert stored is not None and (stored.progress, stored.progress_note, stored.progress_at) == (
        0.25,
        "page 1 of 4",
        at(10),
    )


def test_a_cancel_request_is_reported_to_the_holder_of_a_covered_job(queue: Queue) -> None:
    worker = _registered(queue, "pod-a")
    a, b = _claim(queue, "pod-a", 2)
    queue.cancel([a.id], now=at(5))
    renewal = queue.renew([a.lease, b.lease], lease_seconds=LEASE, worker=worker, now=at(10))
    assert renewal.states == {a.id: LeaseState.CANCEL_REQUESTED, b.id: LeaseState.HELD}


def test_a_covered_job_reaped_answers_lost_to_its_old_holder(queue: Queue) -> None:
    worker = _registered(queue, "pod-a")
    [job] = _claim(queue, "pod-a", 1)
    assert _reaped(queue, 40) == [job.id]  # the worker never renewed
    [again] = queue.claim("pod-b", job_types=["wl"], now=at(41))
    renewal = queue.renew([job.lease], lease_seconds=LEASE, worker=worker, now=at(42))
    assert renewal.registered is True and renewal.states == {job.id: LeaseState.LOST}
    assert queue.succeed(job.lease, {"late": True}, now=at(43)) is Completion.LEASE_LOST
    assert queue.succeed(again.lease, {"ok": True}, now=at(43)) is Completion.CREATED


# -- secrets, takeovers and strays -----------------------------------------------------------


def test_a_forged_secret_renews_nothing(queue: Queue) -> None:
    worker = _registered(queue, "pod-a")
    jobs = _claim(queue, "pod-a", 2)
    forged = WorkerLease("pod-a", uuid.uuid4())
    strangers = [Lease(j.id, uuid.uuid4(), "pod-a", 1) for j in jobs]
    with psycopg.connect(queue.dsn) as conn:
        renewal = queue.renew(strangers, lease_seconds=LEASE, worker=forged, now=at(25), conn=conn)
        row = conn.execute(COUNTERS).fetchone()
        conn.commit()
    assert renewal.registered is False
    assert renewal.states == {j.id: LeaseState.LOST for j in jobs}
    assert row == (0, 0, 0)
    # Nothing was extended: the real worker's lease (to 30 s) and the jobs' (to 30 s) lapse.
    assert _reaped(queue, 31) == sorted(j.id for j in jobs)
    assert queue.renew([], lease_seconds=LEASE, worker=worker, now=at(32)).registered is True


def test_registering_a_taken_name_uncovers_the_old_jobs_without_shortening_their_lease(queue: Queue) -> None:
    old = _registered(queue, "pod-a")
    jobs = _claim(queue, "pod-a", 2)
    queue.renew([j.lease for j in jobs], lease_seconds=LEASE, worker=old, now=at(50))  # adopted: rows to 80 s
    queue.renew([j.lease for j in jobs], lease_seconds=LEASE, worker=old, now=at(55))  # earned: to 85 s
    new = _registered(queue, "pod-a", seconds=60)  # the restarted pod, same name
    assert new.secret != old.secret
    # The old process is gone: its jobs keep the lease they had earned, and no longer.
    queue.renew([], lease_seconds=LEASE, worker=new, now=at(75))
    assert _reaped(queue, 84) == []
    assert _reaped(queue, 86) == sorted(j.id for j in jobs)


def test_the_worker_whose_name_was_taken_keeps_its_jobs_through_their_tokens(queue: Queue) -> None:
    mine = _registered(queue, "pod-a")
    jobs = _claim(queue, "pod-a", 2)
    _registered(queue, "pod-a", seconds=10)  # someone else registers the name
    renewal = queue.renew([j.lease for j in jobs], lease_seconds=LEASE, worker=mine, now=at(20))
    assert renewal.registered is False  # the worker registers again ...
    assert set(renewal.states.values()) == {LeaseState.HELD}  # ... and lost nothing meanwhile
    again = _registered(queue, "pod-a", seconds=21)
    for s in (40, 60):
        assert set(queue.renew([j.lease for j in jobs], worker=again, now=at(s)).states.values()) == {LeaseState.HELD}
    assert _reaped(queue, 85) == []  # their own rows renewed to 90 s
    assert all(queue.succeed(j.lease, {"ok": j.id}, now=at(86)) is Completion.CREATED for j in jobs)


def test_another_worker_role_cannot_keep_someone_elses_jobs_alive(queue: Queue, make_role: MakeRole) -> None:
    victim = make_role("worker")
    intruder = make_role("worker")
    with Queue(victim) as v:
        mine = v.register_worker("pod-a", lease_seconds=LEASE)
        jobs = [j for j in (v.enqueue("wl", {"i": i}) for i in range(2))]
        claimed = v.claim("pod-a", job_types=["wl"], limit=2, lease=LEASE)
        assert sorted(j.id for j in claimed) == sorted(jobs)
        assert v.renew([j.lease for j in claimed], worker=mine).registered is True
    with Queue(intruder) as x:
        taken = x.register_worker("pod-a", lease_seconds=3600)
        # The intruder renews its registration, with the jobs' ids but not their tokens.
        guesses = [Lease(j.id, uuid.uuid4(), "pod-a", 1) for j in claimed]
        renewal = x.renew(guesses, lease_seconds=3600, worker=taken)
        assert renewal.registered is True and set(renewal.states.values()) == {LeaseState.LOST}
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            x.reap()  # nor reap
        # Registering a name first adopts nothing either: a job claimed under it by someone else
        # (here renewed by its holder without a worker lease) lives on its own lease alone.
        squatted = x.register_worker("pod-b", lease_seconds=3600)
    with Queue(victim) as v:
        v.enqueue("wl", {"i": "b"})
        [other] = v.claim("pod-b", job_types=["wl"], lease=LEASE)
        assert v.heartbeat_many([other.lease], lease_seconds=LEASE) == {other.id: LeaseState.HELD}
    with Queue(intruder) as x:
        guess = Lease(other.id, uuid.uuid4(), "pod-b", 1)
        assert x.renew([guess], lease_seconds=3600, worker=squatted).states == {other.id: LeaseState.LOST}
    # The victim's jobs are no longer covered: a worker lease of an hour keeps none of them.
    later = datetime.now(UTC) + timedelta(seconds=LEASE + 5)
    assert sorted(r.id for r in queue.reap(now=later)) == sorted([*jobs, other.id])


def test_a_job_the_worker_stopped_passing_is_not_kept_alive_by_its_worker_lease(queue: Queue) -> None:
    worker = _registered(queue, "pod-a")
    kept, dropped = _claim(queue, "pod-a", 2)
    queue.renew([kept.lease, dropped.lease], worker=worker, now=at(20))  # adopted; all to 50 s
    queue.renew([kept.lease, dropped.lease], worker=worker, now=at(30))  # the worker lease to 60 s
    # The worker gives `dropped` up (its lease lapsed by its own clock while the database was
    # unreachable) and renews only `kept`: `dropped` runs out of the lease it had earned (60 s).
    for s in (40, 60, 80):
        assert queue.renew([kept.lease], worker=worker, now=at(s)).states == {kept.id: LeaseState.HELD}
    assert _reaped(queue, 59) == []
    assert _reaped(queue, 61) == [dropped.id]
    with psycopg.connect(queue.dsn) as conn:
        renewal = queue.renew([kept.lease], worker=worker, now=at(100), conn=conn)
        row = conn.execute(COUNTERS).fetchone()
        conn.commit()
    assert renewal.states == {kept.id: LeaseState.HELD} and row == (0, 1, 1)  # `kept` still covered
    assert _reaped(queue, 125) == []


def test_a_job_claimed_under_the_workers_name_elsewhere_is_not_kept_alive(queue: Queue) -> None:
    worker = _registered(queue, "pod-a")
    [mine] = _claim(queue, "pod-a", 1)
    [theirs] = _claim(queue, "pod-a", 1, seconds=2)  # another process, the same --name
    for s in (20, 40, 60):
        queue.renew([mine.lease], worker=worker, now=at(s))
    assert _reaped(queue, 31) == []
    assert _reaped(queue, 33) == [theirs.id]  # its own lease, never the worker's
    assert queue.renew([mine.lease], worker=worker, now=at(80)).states == {mine.id: LeaseState.HELD}


def test_register_refuses_what_it_cannot_keep(queue: Queue) -> None:
    with pytest.raises(InvalidArgument, match="owner"):
        queue.register_worker("")
    with pytest.raises(InvalidArgument, match="lease_seconds"):
        queue.register_worker("pod-a", lease_seconds=0)
    with psycopg.connect(queue.dsn) as conn, pytest.raises(psycopg.errors.InvalidParameterValue):
        conn.execute("SELECT pgwork.register_worker('pod-a', 'NaN'::float8)")


def test_no_profile_reads_the_worker_leases(queue: Queue, make_role: MakeRole) -> None:
    _registered(queue, "pod-a")
    for profile in ("reader", "producer", "worker", "reaper", "maintainer"):
        with psycopg.connect(make_role(profile), autocommit=True) as conn:
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute("SELECT secret FROM pgwork.worker_leases")
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute("SELECT pgwork.settle_worker_lease('pod-a', now() + interval '1 day', now(), NULL)")


def test_a_worker_lease_never_shows_its_secret() -> None:
    secret = uuid.uuid4()
    assert str(secret) not in repr(WorkerLease("pod-a", secret))


# -- what the readers show -------------------------------------------------------------------


def test_running_and_the_backlog_show_the_effective_lease_and_heartbeat(queue: Queue) -> None:
    worker = _registered(queue, "pod-a")
    [covered] = _claim(queue, "pod-a", 1)
    [own] = _claim(queue, "pod-b", 1)  # no worker lease: its own row
    queue.renew([covered.lease], worker=worker, now=at(30))  # adopted: its row to 60 s
    queue.renew([covered.lease], worker=worker, now=at(50))  # the worker's row to 80 s
    queue.heartbeat_many([own.lease], now=at(40))
    rows = {r.id: r for r in queue.running(now=at(60))}
    assert rows[covered.id].lease_remaining_seconds == pytest.approx(20.0)
    assert rows[covered.id].since_heartbeat_seconds == pytest.approx(10.0)
    assert rows[own.id].lease_remaining_seconds == pytest.approx(10.0)
    assert rows[own.id].since_heartbeat_seconds == pytest.approx(20.0)
    [stats] = queue.stats(["wl"], now=at(60))
    assert stats.running == 2 and stats.max_heartbeat_age_seconds == pytest.approx(20.0)
    with psycopg.connect(queue.dsn) as conn:
        view = conn.execute("SELECT id FROM pgwork.running ORDER BY lease_remaining_seconds").fetchall()
    assert [r[0] for r in view] == [own.id, covered.id]  # in order of the effective expiry
    shown = queue.job(covered.id)
    assert shown is not None and shown.lease_expires_at == at(80) and shown.heartbeat_at == at(50)


# -- the reaper's cost and the table's size -------------------------------------------------


def test_the_reaper_deletes_worker_rows_long_expired_that_cover_no_running_job(queue: Queue) -> None:
    _registered(queue, "gone-idle")
    _registered(queue, "gone-busy")
    [job] = _claim(queue, "gone-busy", 1)
    queue.heartbeat_many([job.lease], lease_seconds=10_000, now=at(1))  # its own row: to 10,001 s
    _registered(queue, "alive", seconds=3600)
    assert queue.reap(now=at(3000)) == []  # expired, but not for an hour yet
    assert _owners(queue) == ["alive", "gone-busy", "gone-idle"]
    assert queue.reap(now=at(3700)) == []
    assert _owners(queue) == ["alive", "gone-busy"]  # a running job still names gone-busy
    assert queue.succeed(job.lease, {"ok": 1}, now=at(3800)) is Completion.CREATED
    queue.reap(now=at(3801))
    assert _owners(queue) == ["alive"]


def _owners(queue: Queue) -> list[str]:
    with psycopg.connect(queue.dsn) as conn:
        return [r[0] for r in conn.execute("SELECT owner FROM pgwork.worker_leases ORDER BY owner")]


_EXPIRED = re.compile(r"WITH expired AS \((?P<select>.*?)\), before AS", re.DOTALL)


def _reaper_candidates_plan(dsn: str) -> dict[str, Any]:
    """EXPLAIN ANALYZE (JSON) of the installed reaper's choice of expired leases, as the function
    runs it: a generic plan, its clock and limit as parameters."""
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            "SELECT prosrc FROM pg_proc WHERE oid = 'pgwork.reap(integer, timestamptz)'::regprocedure"
        ).fetchone()
    assert row is not None
    found = _EXPIRED.search(str(row[0]))
    assert found is not None, "pgwork.reap no longer chooses its candidates in `WITH expired AS (...)`"
    text = re.sub(r"\bnow_\b", "$1", found.group("select"))
    text = re.sub(r"\bmax_jobs\b", "$2", text)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SET plan_cache_mode = force_generic_plan")
        conn.execute(f"PREPARE reap_probe (timestamptz, integer) AS {text}")
        with conn.transaction(force_rollback=True):
            plan = conn.execute(
                "EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE reap_probe(now() + interval '1 day', 1000)"
            ).fetchone()
    assert plan is not None
    return dict(plan[0][0]["Plan"])


@pytest.mark.slow
def test_the_reaper_reads_jobs_in_flight_and_worker_rows_by_key_whatever_the_history(queue: Queue) -> None:
    with psycopg.connect(queue.dsn, autocommit=True) as conn:
        # A busy week's finished rows, and the rows of a thousand pods long gone.
        conn.execute(
            "INSERT INTO pgwork.jobs (job_type, status, idempotency_key, completed_at, attempt_count)"
            " SELECT 'old', 'succeeded', 'old-' || g, now(), 1 FROM generate_series(1, 100000) AS g"
        )
        conn.execute(
            "INSERT INTO pgwork.worker_leases SELECT 'old-pod-' || g, gen_random_uuid(), now(), now(), now()"
            " FROM generate_series(1, 1000) AS g"
        )
    for w in range(8):
        worker = queue.register_worker(f"pod-{w}")
        jobs = [queue.enqueue("wl", {"w": w, "i": i}) for i in range(5)]
        claimed = queue.claim(f"pod-{w}", job_types=["wl"], limit=5)
        assert sorted(j.id for j in claimed) == sorted(jobs)
        queue.renew([j.lease for j in claimed], worker=worker)
    with psycopg.connect(queue.dsn, autocommit=True) as conn:
        conn.execute("ANALYZE pgwork.jobs")
        conn.execute("ANALYZE pgwork.worker_leases")
    plan = _reaper_candidates_plan(queue.dsn)
    scans = [(node["Node Type"], node.get("Relation Name"), node.get("Index Name")) for node in plan_nodes(plan)]
    assert not any(kind == "Seq Scan" for kind, _, _ in scans), scans
    assert any(index == "jobs_running_idx" for _, _, index in scans), scans
    assert any(index == "worker_leases_pkey" for _, _, index in scans), scans
    assert float(plan["Actual Rows"]) == 40
    # And the function itself: no sequential scan of the jobs, every candidate reaped.
    with psycopg.connect(queue.dsn) as conn:
        reaped = queue.reap(now=datetime.now(UTC) + timedelta(days=1), conn=conn)
        row = conn.execute(
            "SELECT pg_stat_get_xact_numscans('pgwork.jobs'::regclass),"
            "       pg_stat_get_xact_numscans('pgwork.jobs_running_idx'::regclass)"
        ).fetchone()
        conn.rollback()
    assert len(reaped) == 40
    assert row is not None and row[0] == 0 and row[1] >= 1


# -- carried forward from the previous version -----------------------------------------------


def test_the_previous_version_with_jobs_in_every_state_gains_worker_leases(empty_dsn: str) -> None:
    previous = latest_version() - 1  # no number written here: this migration may be renumbered
    at_version(empty_dsn, previous)
    worker_role = f"pgwork_prev_worker_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(empty_dsn) as conn:
        conn.execute(V1_JOBS)
        conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(worker_role)))
        conn.execute("SELECT pgwork.grant_profiles(%s, ARRAY['worker'])", (worker_role,))
    try:
        before = snapshot(empty_dsn)
        ids = by_key(empty_dsn)
        assert migrate(empty_dsn) == list(range(previous + 1, latest_version() + 1))
        assert snapshot(empty_dsn) == before  # every row, every column

        # The worker granted before the upgrade registers and renews without a new grant.
        with Queue(psycopg.conninfo.make_conninfo(empty_dsn, user=worker_role)) as q:
            me = q.register_worker("old-pod")  # the name the pre-upgrade jobs carry
            held = Lease(ids["running"], uuid.UUID("11111111-1111-1111-1111-111111111111"), "old-pod", 1)
            stopping = Lease(ids["stopping"], uuid.UUID("22222222-2222-2222-2222-222222222222"), "old-pod", 1)
            renewal = q.renew([held, stopping], worker=me)
            assert renewal.registered is True
            # Held across the upgrade, adopted by the worker lease: their holder passed their tokens.
            assert renewal.states == {held.job_id: LeaseState.HELD, stopping.job_id: LeaseState.CANCEL_REQUESTED}
            forged = Lease(ids["running"], uuid.uuid4(), "old-pod", 1)
            assert q.renew([forged], worker=me).states == {forged.job_id: LeaseState.LOST}
            [job] = [j for j in q.claim("old-pod", job_types=["t"], limit=5) if j.id == ids["ready"]]
            assert q.renew([held, job.lease], worker=me).states == {
                held.job_id: LeaseState.HELD,
                job.id: LeaseState.HELD,
            }
            assert q.succeed(held, {"after": "upgrade"}) is Completion.CREATED
        with Queue(empty_dsn) as q:
            # The lapsed version-1 lease is reaped; the covered one is not.
            assert [r.id for r in q.reap()] == [ids["lapsed"]]
            assert {r.id for r in q.running()} >= {job.id, ids["stopping"]}
    finally:
        with psycopg.connect(empty_dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(worker_role)))
            conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(worker_role)))
