"""The ready ring (migration 23): the check every ring test makes."""

from __future__ import annotations

import psycopg


def ready_is_pending(dsn: str) -> int:
    """Asserts ready = the pending jobs, one row each with the job's own order columns; returns
    how many there are."""
    with psycopg.connect(dsn) as conn:
        missing = conn.execute(
            """SELECT j.id FROM pgwork.jobs AS j
                WHERE j.status = 'pending'
                  AND NOT EXISTS (SELECT 1 FROM pgwork.ready AS r
                                   WHERE r.job_id = j.id AND r.job_type = j.job_type
                                     AND r.priority = j.priority AND r.available_at = j.available_at)"""
        ).fetchall()
        extra = conn.execute(
            """SELECT r.job_id, j.status FROM pgwork.ready AS r LEFT JOIN pgwork.jobs AS j ON j.id = r.job_id
                WHERE j.status IS DISTINCT FROM 'pending'"""
        ).fetchall()
        twice = conn.execute("SELECT job_id FROM pgwork.ready GROUP BY job_id HAVING count(*) > 1").fetchall()
        row = conn.execute("SELECT count(*) FROM pgwork.ready").fetchone()
    assert (missing, extra, twice) == ([], [], [])
    assert row is not None
    return int(row[0])
