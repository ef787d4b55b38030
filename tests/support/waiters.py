"""For tests of waiting on a job: whether a waiter is listening yet."""

from __future__ import annotations

import psycopg


def waiter_has_read(dsn: str) -> bool:
    """True once a waiter (application_name pgwork…wait) has read the outcome at least once: it
    LISTENs before its first read, so from then on a completion cannot be missed."""
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
            " AND application_name LIKE 'pgwork%%wait' AND query LIKE '%%job_outcome%%'"
        ).fetchone()
    return bool(row and row[0])
