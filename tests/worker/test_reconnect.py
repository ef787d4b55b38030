"""A worker survives its connections being killed under it (pg_terminate_backend)."""

from __future__ import annotations

import signal
import time

import psycopg
import pytest

from pgwork.db import Queue
from tests.support.waiting import wait_for
from tests.support.workers import Spawn

TERMINATE = """
SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
 WHERE datname = current_database() AND application_name LIKE 'pgwork-worker:%%'
"""


@pytest.mark.slow
def test_worker_reconnects_after_its_backends_are_terminated(queue: Queue, spawn_worker: Spawn) -> None:
    first = queue.enqueue("sleep", {"seconds": 2.0, "n": 1})
    w = spawn_worker("--lease", "6s", "--heartbeat", "0.3s", "--poll", "0.2s")
    wait_for(lambda: getattr(queue.job(first), "status", None) == "running", 20, what="claim")
    with psycopg.connect(queue.dsn, autocommit=True) as conn:
        for _ in range(3):  # pool, heartbeat and listener all go, more than once
            killed = conn.execute(TERMINATE).fetchone()
            assert killed is not None and killed[0] >= 1
            time.sleep(0.3)
    wait_for(lambda: getattr(queue.job(first), "status", None) == "succeeded", 20, what="the running job to finish")
    row = queue.job(first)
    assert row is not None and row.attempt_count == 1
    later = [queue.enqueue("noop", {"n": n}) for n in range(5)]
    wait_for(lambda: all(getattr(queue.job(i), "status", None) == "succeeded" for i in later), 20, what="later jobs")
    assert w.alive()
    w.signal(signal.SIGTERM)
    assert w.wait(10) == 0
    assert "Traceback" not in w.log()
