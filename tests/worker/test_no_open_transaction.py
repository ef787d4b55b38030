"""The lab's main finding, checked: no transaction is open while a job's work runs, whether its
handler is plain or `async def`."""

from __future__ import annotations

import signal
import time

import psycopg
import pytest

from pgwork.db import Queue
from tests.support.waiting import wait_for
from tests.support.workers import Kind, Spawn

SAMPLE = """
SELECT pid, application_name, state, backend_xmin IS NOT NULL AS holds_xmin,
       extract(epoch FROM now() - xact_start)::float8 AS xact_seconds,
       (SELECT count(*) FROM pgwork.jobs WHERE status = 'running') AS running
  FROM pg_stat_activity
 WHERE datname = current_database() AND application_name LIKE 'pgwork-worker:%%'
"""


@pytest.mark.slow
def test_no_worker_backend_idles_in_transaction_or_pins_xmin_during_a_job(
    queue: Queue, spawn_worker: Spawn, kind: Kind
) -> None:
    ids = [queue.enqueue(kind.t("sleep"), {"seconds": 2.0, "n": n}) for n in range(2)]
    w = spawn_worker("--concurrency", "2", "--lease", "3s", "--heartbeat", "0.2s")
    samples = []
    with psycopg.connect(queue.dsn, autocommit=True) as conn:
        wait_for(lambda: all(queue.job(i).status == "running" for i in ids), 20, what="both jobs running")
        deadline = time.monotonic() + 1.5  # well inside the 2 s jobs
        while time.monotonic() < deadline:
            samples.extend(conn.execute(SAMPLE).fetchall())
            time.sleep(0.02)
    wait_for(lambda: all(queue.job(i).status == "succeeded" for i in ids), 20, what="both jobs done")
    w.signal(signal.SIGTERM)
    assert w.wait(10) == 0

    assert len(samples) > 20
    assert all(s[5] == 2 for s in samples), "the jobs were running throughout the sampling"
    apps = {s[1] for s in samples}
    # The pool, the heartbeat and the LISTEN connections were all seen...
    assert {"pgwork-worker:w1", "pgwork-worker:w1-heartbeat", "pgwork-worker:w1-listen"} <= apps
    # ...and none of them ever sat in a transaction or held the xmin horizon past a statement.
    assert [s for s in samples if s[2] == "idle in transaction"] == []
    assert [s for s in samples if s[2] == "idle in transaction (aborted)"] == []
    pinned = [s for s in samples if s[3] and (s[4] or 0) > 0.5]
    assert pinned == []
