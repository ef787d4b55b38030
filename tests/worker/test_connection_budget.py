"""What a real `pgwork worker` holds on the server, counted in pg_stat_activity: idle, one pool
connection (+ the LISTEN session); busy, at most the pool + heartbeat (+ LISTEN): pgwork.budget's
numbers, which the operator sums against max_connections."""

from __future__ import annotations

import psycopg
import pytest

from pgwork.budget import worker_connections
from pgwork.db import Queue
from pgwork.models import NewJob
from tests.support.waiting import wait_for
from tests.support.workers import Spawn

pytestmark = pytest.mark.slow


def held(dsn: str, worker_id: str) -> int:
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE %s",
            (f"pgwork-worker:{worker_id}%",),
        ).fetchone()
    assert row is not None
    return int(row[0])


@pytest.mark.parametrize("listening", [True, False], ids=["listen", "no-listen"])
def test_idle_and_busy_connections_match_the_budget(
    dsn: str, queue: Queue, spawn_worker: Spawn, listening: bool
) -> None:
    expected = worker_connections(2, listening)
    args = ["--concurrency", "2", "--lease", "3s"] + ([] if listening else ["--no-listen"])
    worker = spawn_worker(*args, worker_id="budget")
    # The heartbeat's session connection goes at its first round with nothing held (1 s here).
    wait_for(lambda: held(dsn, "budget") == expected.idle, what=f"{expected.idle} idle connections")
    queue.enqueue_many([NewJob("sleep", {"seconds": 4}) for _ in range(2)])
    wait_for(lambda: len(queue.running()) == 2, what="both jobs running")
    # The heartbeat's session opens again at its first round with jobs held.
    busy = wait_for(lambda: (n := held(dsn, "budget")) > expected.idle and n, what="the heartbeat's connection")
    assert busy <= expected.busy, busy
    wait_for(lambda: not queue.running() and held(dsn, "budget") <= expected.idle + 1)
    assert worker.alive()
