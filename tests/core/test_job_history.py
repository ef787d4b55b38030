"""Finished-job history by day (migration 27): archiving moves exactly the succeeded and cancelled
jobs past the cutoff whose relatives no longer need them, a job is always in exactly one table
(also while jobs are enqueued, claimed, finished and cancelled beside it), retention drops whole
old days only, the reaper profile alone may do either, and `job show` still finds an archived job."""

from __future__ import annotations

import threading
import time
import uuid
from datetime import UTC, date, datetime, timedelta

import psycopg
import pytest
from psycopg import sql

from pgwork import sql_files
from pgwork.db import Queue, migrate
from pgwork.errors import InvalidArgument
from pgwork.reaper import Reaper, ReaperConfig
from tests.support.cli import pgwork
from tests.support.db import MakeRole, drop_roles, snapshot
from tests.support.rows import Rows
from tests.support.versions import at_version

Denied = psycopg.errors.InsufficientPrivilege
NOW = datetime.now(UTC)
OLD = NOW - timedelta(days=3)  # past the one-day cutoff the tests archive at
DAY = timedelta(days=1)


def _ids(dsn: str, table: str) -> set[int]:
    with psycopg.connect(dsn) as conn:
        return {r[0] for r in conn.execute(f"SELECT id FROM pgwork.{table}")}


def _history_days(dsn: str) -> list[str]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT c.relname FROM pg_inherits AS i JOIN pg_class AS c ON c.oid = i.inhrelid "
            "WHERE i.inhparent = 'pgwork.job_history'::regclass ORDER BY 1"
        ).fetchall()
    return [r[0] for r in rows]


def _finish_at(queue: Queue, job_type: str, when: datetime) -> int:
    """Claim a job of `job_type` (at the real time: a released child is available from then) and
    finish it as of `when`."""
    [held] = queue.claim("w", job_types=[job_type], limit=1)
    queue.succeed(held.lease, {"ok": held.id}, now=when)
    return held.id


def test_archive_moves_exactly_the_finished_jobs_past_the_cutoff_whose_relatives_are_done(queue: Queue) -> None:
    rows = Rows(queue)
    moved = {
        "succeeded, old": rows.succeeded(now=OLD, job_type="a1"),
        "cancelled, old": rows.cancelled(now=OLD, job_type="a2"),
    }
    kept = {
        "dead, old (retry acts on it)": rows.dead(now=OLD, job_type="k1"),
        "succeeded, recent": rows.succeeded(now=NOW, job_type="k2"),
        "cancelled, recent": rows.cancelled(now=NOW, job_type="k3"),
        "pending": rows.pending(now=OLD, job_type="k4"),
        "running": rows.running(now=OLD, job_type="k5").id,
    }
    # A parent that succeeded long ago whose child still waits for another parent: kept, edges too.
    p_done = queue.enqueue("p", {"n": 1}, now=OLD)
    p_live = queue.enqueue("q", {"n": 2}, now=OLD)
    waiting = queue.enqueue("c", {"n": 3}, after=[p_done, p_live], now=OLD)
    assert _finish_at(queue, "p", OLD) == p_done
    kept["succeeded parent of a waiting child"] = p_done
    kept["its waiting child"] = waiting
    kept["its pending other parent"] = p_live
    # A whole finished family, all old: moves.
    f_parent = queue.enqueue("fp", {"n": 4}, now=OLD)
    f_child = queue.enqueue("fc", {"n": 5}, after=[f_parent], now=OLD)
    _finish_at(queue, "fp", OLD)
    _finish_at(queue, "fc", OLD)
    moved["succeeded parent and child, both old"] = f_parent
    moved["their child"] = f_child
    # A child that ran after its parent died: the dead parent can be retried, so both stay.
    d_parent = queue.enqueue("dp", {"n": 6}, max_attempts=1, now=OLD)
    d_child = queue.enqueue("dc", {"n": 7}, after=[d_parent], on_parent_failure="run", now=OLD)
    [held] = queue.claim("w", job_types=["dp"], now=OLD)
    queue.fail(held.lease, "boom", retryable=False, now=OLD)
    _finish_at(queue, "dc", OLD)
    kept["succeeded child of a dead parent"] = d_child
    kept["the dead parent"] = d_parent
    # An old succeeded parent whose child was cancelled recently (retryable, not yet archivable).
    r_parent = queue.enqueue("rp", {"n": 8}, now=OLD)
    r_child = queue.enqueue("rc", {"n": 9}, after=[r_parent], now=OLD)
    _finish_at(queue, "rp", OLD)
    queue.cancel([r_child], now=NOW)
    kept["old parent of a recently cancelled child"] = r_parent
    kept["the recently cancelled child"] = r_child

    assert queue.archive(DAY, now=NOW) == len(moved)
    assert _ids(queue.dsn, "job_history") == set(moved.values()), moved
    assert _ids(queue.dsn, "jobs") == set(kept.values()), kept
    family = queue.job_family(waiting, limit=10)
    assert {r.id for r in family if r.relation == "parent"} == {p_done, p_live}
    assert queue.archive(DAY, now=NOW) == 0  # nothing left to move: idempotent
    # Once the family has finished (and is old), the kept parent goes too.
    later = NOW + timedelta(days=3)
    _finish_at(queue, "q", NOW)
    _finish_at(queue, "c", NOW)
    # Three days on, all that finished has aged: the family, the recent ones, the recently cancelled
    # child and its parent. Dead jobs, the running one and the pending one stay.
    assert queue.archive(DAY, now=later) == 7
    assert _ids(queue.dsn, "jobs") == {
        kept["dead, old (retry acts on it)"],
        kept["pending"],
        kept["running"],
        d_child,
        d_parent,
    }


def test_batches_resume_and_partitions_are_one_per_utc_day(queue: Queue) -> None:
    base = datetime(2026, 11, 1, 12, tzinfo=UTC)
    rows = Rows(queue)
    made = [rows.succeeded(now=base + timedelta(hours=8 * i)) for i in range(7)]  # 11-01 .. 11-03
    seen: list[tuple[int, int]] = []
    assert queue.archive(DAY, batch=2, now=NOW, on_progress=lambda p: seen.append((p.moved, p.total))) == 7
    assert seen == [(2, 2), (2, 4), (2, 6), (1, 7)]
    assert _ids(queue.dsn, "job_history") == set(made)
    assert _history_days(queue.dsn) == ["job_history_20261101", "job_history_20261102", "job_history_20261103"]
    assert queue.archive(DAY, batch=1, max_batches=1, now=NOW) == 0


def test_a_job_is_in_exactly_one_table_while_others_are_enqueued_claimed_finished_and_cancelled(
    queue: Queue,
) -> None:
    stop = threading.Event()
    made: list[int] = []
    errors: list[BaseException] = []

    def churn() -> None:
        try:
            with Queue(queue.dsn) as q:
                while not stop.is_set():
                    ids = [q.enqueue("churn", {"n": i}) for i in range(4)]
                    made.extend(ids)
                    q.cancel(ids[:1])
                    for held in q.claim("w", job_types=["churn"], limit=3):
                        q.succeed(held.lease, {"ok": True})
        except BaseException as exc:
            errors.append(exc)
            raise

    thread = threading.Thread(target=churn)
    thread.start()
    archived = 0
    try:
        while archived < 200 and not errors:
            archived += queue.archive(timedelta(0), batch=7)
    finally:
        stop.set()
        thread.join(timeout=60)
    assert not errors and not thread.is_alive()
    live, history = _ids(queue.dsn, "jobs"), _ids(queue.dsn, "job_history")
    assert not live & history
    assert live | history == set(made)
    with psycopg.connect(queue.dsn) as conn:
        statuses = {r[0] for r in conn.execute("SELECT DISTINCT status::text FROM pgwork.job_history")}
    assert statuses <= {"succeeded", "cancelled"}


def test_retention_drops_whole_old_days_only(queue: Queue) -> None:
    today = NOW.date()
    rows = Rows(queue)
    by_day = {
        d: rows.succeeded(now=datetime.combine(today - timedelta(days=d), datetime.min.time(), UTC)) for d in (3, 2, 1)
    }
    by_day[0] = rows.succeeded(now=NOW - timedelta(seconds=1))
    assert queue.archive(timedelta(0)) == 4
    dropped = queue.drop_history(today - timedelta(days=1))
    assert [(d.day, d.outcome) for d in dropped] == [
        (today - timedelta(days=3), "dropped"),
        (today - timedelta(days=2), "dropped"),
    ]
    assert all(d.bytes > 0 and d.partition_name == f"job_history_{d.day:%Y%m%d}" for d in dropped)
    assert _ids(queue.dsn, "job_history") == {by_day[1], by_day[0]}
    assert queue.drop_history(today - timedelta(days=1)) == []
    # Today's day is never dropped: `before` is today at the latest.
    assert [d.day for d in queue.drop_history(today)] == [today - timedelta(days=1)]
    with pytest.raises(psycopg.errors.InvalidParameterValue, match="before must be a day no later than today"):
        queue.drop_history(today + timedelta(days=1))
    assert _ids(queue.dsn, "job_history") == {by_day[0]}


def test_a_day_a_report_is_reading_is_left_busy_not_waited_for(queue: Queue) -> None:
    Rows(queue).succeeded(now=OLD)
    assert queue.archive(DAY) == 1
    [name] = _history_days(queue.dsn)
    with psycopg.connect(queue.dsn) as report:
        report.execute("SELECT count(*) FROM pgwork.all_jobs")  # holds ACCESS SHARE until it ends
        [busy] = queue.drop_history(NOW.date())
        assert (busy.partition_name, busy.outcome) == (name, "busy")
    [gone] = queue.drop_history(NOW.date())
    assert gone.outcome == "dropped" and _history_days(queue.dsn) == []


def test_job_show_and_wait_find_an_archived_job(queue: Queue, dsn: str) -> None:
    job_id = Rows(queue).succeeded(result={"pages": 12}, now=OLD)
    assert queue.archive(DAY) == 1
    assert _ids(dsn, "jobs") == set()
    detail = queue.job_detail(job_id)
    assert detail is not None and detail.status == "succeeded"
    row = queue.job(job_id)
    assert row is not None and row.status == "succeeded"
    contents = queue.job_contents(job_id)
    assert contents is not None and contents.result == {"pages": 12}
    out = pgwork("job", "show", str(job_id), dsn=dsn)
    assert out.returncode == 0, out.stderr
    assert "succeeded" in out.stdout and '{"pages": 12}' in out.stdout


def test_the_reaper_profile_archives_and_drops_and_no_other_does(dsn: str, make_role: MakeRole) -> None:
    with Queue(dsn) as owner:
        Rows(owner).succeeded(now=OLD)
        Rows(owner).succeeded(now=OLD, job_type="again")
    for profile in ("worker", "producer", "reader"):
        with Queue(make_role(profile)) as q:
            with pytest.raises(Denied):
                q.archive(DAY)
            with pytest.raises(Denied):
                q.drop_history(NOW.date())
    with Queue(make_role("reaper")) as q:
        assert q.archive(DAY, batch=1) == 2
        with pytest.raises(Denied, match="only the owner"):
            q.archive(DAY, now=NOW + timedelta(days=10))  # the clock is the server's
        assert [d.outcome for d in q.drop_history(NOW.date())] == ["dropped"]
    for statement in ("SELECT pgwork.history_partition(current_date)", "SELECT * FROM pgwork.all_jobs"):
        with psycopg.connect(make_role("reaper"), autocommit=True) as conn, pytest.raises(Denied):
            conn.execute(statement)


def test_the_reaper_archives_each_round_only_when_asked(queue: Queue) -> None:
    old = Rows(queue).succeeded(now=OLD)
    with Reaper(lambda: Queue(queue.dsn)) as r:
        r.run_once()
        assert r.archived == 0
    assert _ids(queue.dsn, "job_history") == set()
    with Reaper(lambda: Queue(queue.dsn), ReaperConfig(archive_after=86400.0)) as r:
        r.run_once()
        assert r.archived == 1
    assert _ids(queue.dsn, "job_history") == {old}
    with pytest.raises(InvalidArgument, match="archive_after"):
        ReaperConfig(archive_after=-1.0)


@pytest.mark.parametrize(
    ("call", "field"),
    [
        (lambda q: q.archive(30), "older_than"),
        (lambda q: q.archive(timedelta(days=-1)), "older_than"),
        (lambda q: q.archive(DAY, batch=0), "batch"),
        (lambda q: q.archive(DAY, max_batches=0), "max_batches"),
        (lambda q: q.drop_history("2026-11-01"), "before"),
        (lambda q: q.drop_history(NOW), "before"),
    ],
)
def test_bad_inputs_are_refused_naming_the_field(queue: Queue, call: object, field: str) -> None:
    with pytest.raises(InvalidArgument) as caught:
        call(queue)  # type: ignore[operator]
    assert caught.value.field == field


def test_the_commands_refuse_bad_input_naming_the_option_and_work(dsn: str, queue: Queue) -> None:
    for args, words in (
        (("archive", "--older-than", "30"), "--older-than"),
        (("archive", "--older-than", "7d", "--batch-size", "0"), "--batch-size"),
        (("drop-history",), "exactly one of --before"),
        (("drop-history", "--before", "2026-01-01", "--older-than", "3d"), "exactly one of --before"),
        (("drop-history", "--before", "01/02/2026"), "--before"),
        (("drop-history", "--before", str(NOW.date() + DAY)), "today's history is never dropped"),
        (("reap", "--archive-after", "5"), "--archive-after"),
    ):
        out = pgwork(*args, dsn=dsn)
        assert out.returncode != 0 and words in out.stderr, (args, out.stderr)
    Rows(queue).succeeded(now=OLD)
    out = pgwork("archive", "--older-than", "1d", dsn=dsn)
    assert out.returncode == 0 and out.stdout.startswith("archived 1 "), out.stderr
    out = pgwork("drop-history", "--older-than", "1d", dsn=dsn)
    assert out.returncode == 0, out.stderr
    assert f"dropped job_history_{OLD:%Y%m%d}" in out.stdout
    assert _history_days(dsn) == []


def test_history_cutoff_is_the_day_of_now_minus_the_age() -> None:
    from pgwork.commands.housekeeping import history_cutoff

    now = datetime(2026, 12, 5, 1, 30, tzinfo=UTC)
    assert history_cutoff(None, "1d", now) == date(2026, 12, 4)
    assert history_cutoff(None, "2h", now) == date(2026, 12, 4)
    assert history_cutoff(None, "1h", now) == date(2026, 12, 5)
    assert history_cutoff("2026-11-30", None, now) == date(2026, 11, 30)


def test_the_migration_carries_a_database_with_finished_jobs_and_they_archive_after(empty_dsn: str) -> None:
    history = next(m.version for m in sql_files.migrations() if m.name == "job_history")
    at_version(empty_dsn, history - 1)
    reaper, worker = (f"pgwork_jh_{kind}_{uuid.uuid4().hex[:8]}" for kind in ("reaper", "worker"))
    # As a version-26 pgwork left them (its Queue refuses an older schema, so the rows go in by hand).
    with psycopg.connect(empty_dsn) as conn:
        made = {
            (status, age): conn.execute(
                "INSERT INTO pgwork.jobs (job_type, idempotency_key, status, completed_at) "
                "VALUES ('old', gen_random_uuid()::text, %s::pgwork.job_status, %s::timestamptz) RETURNING id",
                (status, when),
            ).fetchone()[0]  # type: ignore[index]
            for status, age, when in (
                ("succeeded", "old", OLD),
                ("cancelled", "old", OLD),
                ("dead", "old", OLD),
                ("succeeded", "new", NOW),
                ("pending", "new", None),
            )
        }
        # A reaper and a worker granted their profiles before the migration.
        for role, profile in ((reaper, "reaper"), (worker, "worker")):
            conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
            conn.execute("SELECT pgwork.grant_profiles(%s, ARRAY[%s])", (role, profile))
    old = [made["succeeded", "old"], made["cancelled", "old"]]
    stay = [made["dead", "old"], made["succeeded", "new"], made["pending", "new"]]
    try:
        before = snapshot(empty_dsn)
        assert migrate(empty_dsn) == list(range(history, sql_files.latest_version() + 1))
        assert snapshot(empty_dsn) == before  # every row, every column
        with Queue(psycopg.conninfo.make_conninfo(empty_dsn, user=worker)) as q, pytest.raises(Denied):
            q.archive(DAY)
        with Queue(psycopg.conninfo.make_conninfo(empty_dsn, user=reaper)) as q:
            assert q.archive(DAY) == 2  # granted by the migration, not again by hand
            assert _ids(empty_dsn, "job_history") == set(old)
            assert _ids(empty_dsn, "jobs") == set(stay)
            assert all(q.job_detail(i) is not None for i in old + stay)
    finally:
        drop_roles(empty_dsn, [reaper, worker])


def test_an_enqueue_naming_a_parent_being_archived_waits_and_is_refused_once_it_moved(queue: Queue) -> None:
    parent = Rows(queue).succeeded(now=OLD)
    outcome: list[object] = []

    def enqueue_child() -> None:
        with Queue(queue.dsn) as q:
            try:
                outcome.append(q.enqueue("child", {"n": 1}, after=[parent]))
            except Exception as exc:
                outcome.append(exc)

    with psycopg.connect(queue.dsn) as conn:
        assert queue.archive(DAY, conn=conn) == 1  # moved, not committed: the parent's row stays locked
        thread = threading.Thread(target=enqueue_child)
        thread.start()
        deadline = time.monotonic() + 30
        while not _someone_waits_on_a_lock(queue.dsn) and time.monotonic() < deadline:
            thread.join(timeout=0.05)
        assert _someone_waits_on_a_lock(queue.dsn)
    thread.join(timeout=30)
    [result] = outcome
    # The archive committed first: the child is refused as naming no job, never left without its edge.
    assert isinstance(result, InvalidArgument) and result.field == "after", result
    assert f"no job {parent}" in str(result)
    assert _ids(queue.dsn, "jobs") == set() and _ids(queue.dsn, "job_history") == {parent}


def _someone_waits_on_a_lock(dsn: str) -> bool:
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
        ).fetchone()
    return bool(row and row[0])


def test_history_has_the_columns_of_jobs_in_their_order(dsn: str) -> None:
    """A later migration that adds a column to jobs must add it to job_history (and all_jobs)."""
    query = (
        "SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute "
        "WHERE attrelid = %s::regclass AND attnum > 0 AND NOT attisdropped ORDER BY attnum"
    )
    with psycopg.connect(dsn) as conn:
        jobs, history, view = (
            conn.execute(query, (name,)).fetchall() for name in ("pgwork.jobs", "pgwork.job_history", "pgwork.all_jobs")
        )
    assert history == jobs, "add the column to pgwork.job_history too (docs/contributing.md)"
    assert view == jobs, "recreate pgwork.all_jobs (docs/contributing.md)"
