"""A per-type limit holds for real worker processes: three workers with two runners each never run
more than the type's max_running at once, and the backlog still drains (a worker whose claim the
limit leaves empty waits, or with --burst exits, while the others finish it)."""

from __future__ import annotations

import threading

import psycopg

from pgwork.db import Queue
from pgwork.models import NewJob
from tests.support.workers import Spawn


def test_three_workers_keep_to_a_limit_of_two(queue: Queue, spawn_worker: Spawn) -> None:
    queue.enqueue_many([NewJob("sleep", {"seconds": 0.05, "n": n}) for n in range(30)])
    queue.set_limit("sleep", max_running=2)
    seen: list[int] = []
    stop = threading.Event()

    def watch() -> None:
        with psycopg.connect(queue.dsn, autocommit=True) as conn:
            while not stop.is_set():
                row = conn.execute("SELECT count(*) FROM pgwork.jobs WHERE status = 'running'").fetchone()
                seen.append(int(row[0]) if row else 0)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        workers = [spawn_worker("--burst", "--no-listen", "--poll", "0.05s", "--concurrency", "2") for _ in range(3)]
        codes = [w.wait(120) for w in workers]
    finally:
        stop.set()
        watcher.join()
    assert codes == [0, 0, 0], [w.log()[-2000:] for w in workers]
    assert [s.ready + s.running for s in queue.stats(["sleep"])] == [0]
    with psycopg.connect(queue.dsn) as conn:
        row = conn.execute("SELECT count(*), sum(attempt_count) FROM pgwork.jobs WHERE status = 'succeeded'").fetchone()
    assert tuple(row or ()) == (30, 30)
    print(f"\nrunning at once, as the database saw it: max {max(seen)} over {len(seen)} readings")
    assert max(seen) <= 2
    assert max(seen) == 2
