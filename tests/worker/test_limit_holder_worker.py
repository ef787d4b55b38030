"""A lock holder cannot freeze a worker (issue 24, class 3), end to end: a session holding the
limit row of one of a worker's types in an open transaction; the worker runs its other types'
jobs meanwhile and counts the skips in pgwork_claim_limit_skipped_total."""

from __future__ import annotations

import psycopg
import pytest

from pgwork.db import Queue
from tests.support.scrape import get, samples
from tests.support.waiting import wait_for
from tests.support.workers import Spawn, free_port


@pytest.mark.slow
def test_a_worker_runs_its_other_types_while_a_limit_row_is_held(queue: Queue, spawn_worker: Spawn) -> None:
    queue.set_limit("noop", max_running=10)
    held_back = [queue.enqueue("noop", {"n": n}) for n in range(2)]
    with psycopg.connect(queue.dsn) as holder:
        # The hostile session: a claim of a noop job never committed, so noop's limit row stays locked.
        assert holder.execute("SELECT id FROM pgwork.claim('hostile', ARRAY['noop'], 1, 30)").fetchall()
        others = [queue.enqueue("sleep", {"seconds": 0.01, "n": n}) for n in range(3)]
        port = free_port()
        spawn_worker("--job-types", "noop,sleep", "--metrics-port", str(port), "--poll", "200ms")
        url = f"http://127.0.0.1:{port}/metrics"

        def ran_others() -> dict[tuple[str, tuple[tuple[str, str], ...]], float] | None:
            done = all((j := queue.job(i)) is not None and j.status == "succeeded" for i in others)
            s = samples(get(url)[1])
            skipped = s.get(("pgwork_claim_limit_skipped_total", (("job_type", "noop"),)), 0)
            return s if done and skipped >= 1 else None

        wait_for(ran_others, 30, interval=0.2, what="the sleep jobs done and a skip counted while noop is held")
        statuses = [(j.status if (j := queue.job(i)) else None) for i in held_back]
        assert statuses.count("pending") >= 1  # the held type waits; nothing else did
        holder.rollback()
    wait_for(lambda: all((j := queue.job(i)) is not None and j.status == "succeeded" for i in held_back), 30,
             what="the held type's jobs run once the holder lets go")  # fmt: skip
