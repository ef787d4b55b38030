"""Heartbeats are HOT updates (no index holds a column a heartbeat writes), and the reaper still
finds expired leases through a partial index of jobs in flight, not by scanning history.

The counters read here are the backend's own for the current transaction
(pg_stat_get_xact_*): exact, and not subject to the statistics collector's delay.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import psycopg
import pytest

from pgwork.db import Queue
from pgwork.models import Lease
from pgwork.progress import Progress

RUNNING = 60
WORKERS = 6

COUNTERS = """
SELECT pg_stat_get_xact_tuples_updated('pgwork.jobs'::regclass),
       pg_stat_get_xact_tuples_hot_updated('pgwork.jobs'::regclass)
"""

# What a heartbeat writes: the lease's renewal, (migration 0012) the progress it carries and
# (migration 0015) the adoption of a job by its worker's lease.
# The checkpoint is written by its own statement, but on the same running rows: kept HOT too.
HEARTBEAT_COLUMNS = """
SELECT DISTINCT a.attname
  FROM pg_index AS i
  JOIN pg_attribute AS a ON a.attrelid = i.indrelid AND a.attnum = ANY (i.indkey)
 WHERE i.indrelid = 'pgwork.jobs'::regclass
   AND a.attname IN ('heartbeat_at', 'lease_expires_at', 'progress', 'progress_note', 'progress_at',
                     'checkpoint', 'checkpoint_at', 'worker_lease_token')
UNION
SELECT 'predicate or expression of ' || c.relname
  FROM pg_index AS i JOIN pg_class AS c ON c.oid = i.indexrelid
 WHERE i.indrelid = 'pgwork.jobs'::regclass
   AND (pg_get_expr(i.indpred, i.indrelid) ~ '(heartbeat_at|lease_expires_at|progress|checkpoint|worker_lease)'
        OR pg_get_expr(i.indexprs, i.indrelid) ~ '(heartbeat_at|lease_expires_at|progress|checkpoint|worker_lease)')
"""


def _leases(queue: Queue, lease: float = 300.0) -> list[list[Lease]]:
    """RUNNING jobs held by WORKERS workers, each worker's leases apart, as each renews its own."""
    with psycopg.connect(queue.dsn, autocommit=True) as conn:
        # A HOT update also needs room for the new row version on the row's page. In a running fleet
        # the room comes from pruning the versions earlier renewals left (the lab measures that
        # steady state at the table's own fillfactor); here each page is left nine-tenths empty, so what
        # is counted is what the indexes allow, not what pruning's timing permits.
        conn.execute("ALTER TABLE pgwork.jobs SET (fillfactor = 10, autovacuum_enabled = false)")
    for i in range(RUNNING):
        queue.enqueue("hot", {"i": i})
    held = [
        [c.lease for c in queue.claim(f"hot-worker-{w}", job_types=["hot"], limit=RUNNING // WORKERS, lease=lease)]
        for w in range(WORKERS)
    ]
    assert sum(len(h) for h in held) == RUNNING
    # The claims' own new row versions went onto the same pages; vacuum (its horizon exact, unlike
    # the opportunistic pruning's, which other databases' snapshots can hold back) frees the old ones.
    with psycopg.connect(queue.dsn, autocommit=True) as conn:
        conn.execute("VACUUM pgwork.jobs")
    return held


def _renew_and_count(queue: Queue, held: list[list[Lease]], *, progress: bool = False) -> tuple[int, int]:
    """Renew as workers do (each worker its own leases, in its own transaction) and count the
    updates; with `progress`, every renewal also carries a new progress and note."""
    updated = hot = 0
    for leases in held:
        reported = (
            {lease.job_id: Progress(0.5, f"page {lease.job_id} of 1000") for lease in leases} if progress else None
        )
        with psycopg.connect(queue.dsn) as conn:
            states = queue.heartbeat_many(leases, lease_seconds=300, conn=conn, progress=reported)
            assert len(states) == len(leases)
            row = conn.execute(COUNTERS).fetchone()
            conn.commit()
        assert row is not None
        updated += int(row[0])
        hot += int(row[1])
    return updated, hot


def test_no_index_holds_a_column_a_heartbeat_writes(dsn: str) -> None:
    with psycopg.connect(dsn) as conn:
        assert conn.execute(HEARTBEAT_COLUMNS).fetchall() == []


def test_every_renewal_is_a_hot_update(queue: Queue) -> None:
    leases = _leases(queue)
    updated, hot = _renew_and_count(queue, leases)
    assert (updated, hot) == (RUNNING, RUNNING)


def test_every_renewal_carrying_progress_is_a_hot_update(queue: Queue) -> None:
    leases = _leases(queue)
    updated, hot = _renew_and_count(queue, leases, progress=True)
    assert (updated, hot) == (RUNNING, RUNNING)
    with psycopg.connect(queue.dsn) as conn:
        stored = conn.execute("SELECT count(*) FROM pgwork.jobs WHERE progress = 0.5").fetchone()
    assert stored == (RUNNING,)


def test_every_checkpoint_is_a_hot_update(queue: Queue) -> None:
    leases = [lease for held in _leases(queue) for lease in held]
    with psycopg.connect(queue.dsn) as conn:
        for lease in leases:
            assert queue.checkpoint(lease, {"page": lease.job_id}, conn=conn)
        row = conn.execute(COUNTERS).fetchone()
        conn.commit()
    assert row == (RUNNING, RUNNING)


def test_with_the_old_lease_index_no_renewal_is_hot(queue: Queue) -> None:
    """The control: what version 1's index on lease_expires_at did to every heartbeat."""
    leases = _leases(queue)
    with psycopg.connect(queue.dsn, autocommit=True) as conn:
        conn.execute("CREATE INDEX old_lease_idx ON pgwork.jobs (lease_expires_at) WHERE status = 'running'")
    updated, hot = _renew_and_count(queue, leases)
    assert (updated, hot) == (RUNNING, 0)


@pytest.mark.slow
def test_the_reaper_reads_jobs_in_flight_through_the_partial_index_under_history(queue: Queue) -> None:
    with psycopg.connect(queue.dsn, autocommit=True) as conn:
        # 100,000 finished rows underneath, as retention would leave a busy week.
        conn.execute(
            "INSERT INTO pgwork.jobs (job_type, status, idempotency_key, completed_at, attempt_count)"
            " SELECT 'old', 'succeeded', 'old-' || g, now(), 1 FROM generate_series(1, 100000) AS g"
        )
    leases = [lease for held in _leases(queue, lease=0.001) for lease in held]
    later = datetime.now(UTC) + timedelta(seconds=5)
    with psycopg.connect(queue.dsn, autocommit=True) as conn:
        conn.execute("ANALYZE pgwork.jobs")
    with psycopg.connect(queue.dsn) as conn:
        reaped = queue.reap(now=later, conn=conn)
        row = conn.execute(
            "SELECT pg_stat_get_xact_numscans('pgwork.jobs'::regclass),"
            "       pg_stat_get_xact_numscans('pgwork.jobs_running_idx'::regclass),"
            "       pg_stat_get_xact_tuples_returned('pgwork.jobs'::regclass)"
        ).fetchone()
        conn.rollback()
    assert sorted(r.id for r in reaped) == sorted(lease.job_id for lease in leases)
    assert row is not None
    seq_scans, index_scans, rows_read_by_seq_scans = row
    assert seq_scans == 0 and rows_read_by_seq_scans == 0, "the reaper scanned the whole table"
    assert index_scans >= 1
