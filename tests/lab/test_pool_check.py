"""The pool's connection check: free for a silent idle connection, a real check for a dead one."""

from __future__ import annotations

import psycopg
import pytest

from pgwork.db import Queue, check_idle_connection, connect
from tests.support.waiting import wait_for


def _terminate(dsn: str, application_name: str) -> int:
    with psycopg.connect(dsn, autocommit=True) as admin:
        row = admin.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
            " WHERE datname = current_database() AND application_name = %s",
            (application_name,),
        ).fetchone()
    assert row is not None
    return int(row[0])


def _backends(dsn: str, application_name: str) -> int:
    with psycopg.connect(dsn, autocommit=True) as admin:
        row = admin.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND application_name = %s",
            (application_name,),
        ).fetchone()
    assert row is not None
    return int(row[0])


def test_a_healthy_idle_connection_passes(dsn: str) -> None:
    conn = connect(dsn, application_name="pgwork-check-ok")
    try:
        conn.execute("SELECT 1").fetchall()
        check_idle_connection(conn)
        assert conn.execute("SELECT 2 AS two").fetchone() == {"two": 2}
    finally:
        conn.close()


def test_a_terminated_backend_is_caught_before_use(dsn: str) -> None:
    conn = connect(dsn, application_name="pgwork-check-dead")
    try:
        assert _terminate(dsn, "pgwork-check-dead") == 1

        def refused() -> bool:
            try:
                check_idle_connection(conn)
            except psycopg.OperationalError:
                return True
            return False

        # The FATAL message reaches the socket a moment after the kill; from then on the check refuses.
        wait_for(refused, 5, what="the check refusing a terminated connection")
    finally:
        conn.close()


def test_a_closed_connection_is_refused(dsn: str) -> None:
    conn = connect(dsn)
    conn.close()
    with pytest.raises(psycopg.OperationalError, match="closed"):
        check_idle_connection(conn)


def test_the_queue_replaces_a_killed_pool_connection_without_the_caller_noticing(dsn: str) -> None:
    with Queue(dsn, pool_size=1, application_name="pgwork-check-pool") as q:
        job = q.enqueue("t", {"n": 1})
        assert _terminate(dsn, "pgwork-check-pool") == 1
        wait_for(lambda: _backends(dsn, "pgwork-check-pool") == 0, 5, what="the terminated backend gone")
        [claimed] = q.claim("w")
        assert claimed.id == job
