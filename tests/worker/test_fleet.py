"""The lab's run: 16 worker processes, 400 jobs of 200 ms, exactly 400 claims."""

from __future__ import annotations

import psycopg
import pytest
from workerkit import Spawn

from pgwork.models import NewJob
from pgwork.queue import Queue


@pytest.mark.slow
def test_sixteen_workers_four_hundred_jobs_one_claim_each(queue: Queue, spawn_worker: Spawn) -> None:
    queue.enqueue_many([NewJob("sleep", {"seconds": 0.2, "n": n}) for n in range(400)])
    # Polling only, to keep the fleet at three connections per process on a shared server.
    workers = [spawn_worker("--burst", "--no-listen", "--poll", "0.1s") for _ in range(16)]
    codes = [w.wait(120) for w in workers]
    assert codes == [0] * 16, [w.log()[-2000:] for w, c in zip(workers, codes, strict=True) if c]
    with psycopg.connect(queue.dsn) as conn:
        row = conn.execute(
            "SELECT count(*), count(*) FILTER (WHERE status = 'succeeded'), sum(attempt_count),"
            " count(DISTINCT lease_owner) FROM pgwork.jobs"
        ).fetchone()
        results = conn.execute("SELECT count(*), count(DISTINCT job_id) FROM pgwork.job_results").fetchone()
    assert row is not None and results is not None
    jobs, succeeded, claims, owners = row
    assert (jobs, succeeded, claims) == (400, 400, 400)
    assert owners > 1
    assert tuple(results) == (400, 400)
