"""Figures for the operator (issue 4): prints them, asserts nothing.

1. Time from a backlog change to the Deployment patch: the real kopf operator against kmock's
   emulator and a real PostgreSQL; jobs are enqueued (or drained) and the clock stops when the
   Deployment's replicas change. Expected: up to one poll interval of waiting plus the round.
2. Database time per timer round, for 1 JobQueue and for 100 JobQueues (each with its own job
   types) over one database holding a backlog and a long history: what one `stats` reading per JobQueue (one
   `queue_stats` statement) and, on scale-down rounds, `running_by_owner` cost.

Usage: PYTHONPATH=. python scripts/operator_figures.py [--admin-dsn postgresql://postgres@127.0.0.1:5432/postgres]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import uuid
from pathlib import Path

import psycopg
from psycopg import sql

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pgwork.db import Queue, migrate
from pgwork.dsn import with_dbname
from pgwork.models import NewJob
from pgwork.operator.db import QueueCache, jobs_by_owner, sum_backlog
from pgwork.operator.handlers import OperatorOptions
from tests.support import stories
from tests.support.operator import Emulator, eventually, running


def create_database(admin: str) -> tuple[str, str]:
    name = f"pgwork_bench_op_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {} ENCODING 'UTF8' TEMPLATE template0").format(sql.Identifier(name)))
    dsn = with_dbname(admin, name)
    migrate(dsn)
    return name, dsn


def drop_database(admin: str, name: str) -> None:
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def backlog_to_patch(dsn: str, poll: float, rounds: int) -> list[float]:
    emulator = Emulator().start()
    client = emulator.client()
    queue = Queue(dsn, pool_size=2)
    latencies: list[float] = []
    try:
        options = OperatorOptions(clusterwide=True, standalone=True, metrics_port=None, tick_seconds=0.05)
        for _ in running(emulator, options):
            ns = f"bench-{uuid.uuid4().hex[:6]}"
            stories.create_secret(client, ns, "queue-db", dsn)
            stories.create_jobqueue(
                client,
                ns,
                "ocr",
                stories.spec(
                    jobTypes=["bench"],
                    scaling={"scaleDownStabilizationSeconds": 0, "pollIntervalSeconds": poll, "maxReplicas": 20},
                ),
            )
            eventually(lambda: stories.replicas(client, ns, "ocr") == 1, what="steady at 1")  # noqa: B023
            time.sleep(poll)
            for i in range(rounds):
                up = i % 2 == 0
                before = stories.replicas(client, ns, "ocr")
                start = time.monotonic()
                if up:
                    queue.enqueue_many([NewJob("bench", {"r": i, "n": n}) for n in range(50)])
                else:
                    for job in queue.claim("drainer", job_types=["bench"], limit=1000):
                        queue.succeed(job.lease, {})
                eventually(
                    lambda b=before, n=ns: stories.replicas(client, n, "ocr") != b,  # type: ignore[misc]
                    timeout=poll * 5 + 10,
                    interval=0.005,
                    what="the Deployment patch",
                )
                latencies.append(time.monotonic() - start)
                # Desynchronise from the poll phase so the samples spread over it.
                time.sleep(poll * ((i * 0.37) % 1.0))
    finally:
        queue.close()
        client.close()
        emulator.stop()
    return latencies


def fill(queue: Queue, queues: int, pending_per_type: int, history: int) -> None:
    jobs = [NewJob(f"type-{q:03d}", {"n": n}) for q in range(queues) for n in range(pending_per_type)]
    for start in range(0, len(jobs), 5000):
        queue.enqueue_many(jobs[start : start + 5000])
    # History: finished jobs the stats must not scan (partial indexes), plus some running.
    old = [NewJob("history", {"n": n}) for n in range(history)]
    for start in range(0, len(old), 5000):
        queue.enqueue_many(old[start : start + 5000])
    while True:
        claimed = queue.claim("history-worker", job_types=["history"], limit=5000)
        if not claimed:
            break
        for job in claimed:
            queue.succeed(job.lease, {})
    for q in range(queues):
        queue.claim(f"pod-{q:03d}-a", job_types=[f"type-{q:03d}"], limit=3)


def db_time_per_round(dsn: str, queues: int, repeats: int) -> tuple[list[float], list[float], list[float]]:
    """Seconds of DB work for one timer round over `queues` JobQueues on one database:
    (one statement per JobQueue, the operator's shared reading, shared + running_by_owner)."""
    queue = Queue(dsn, pool_size=1, application_name="pgwork-operator")
    per_queue: list[float] = []
    shared: list[float] = []
    with_owners: list[float] = []
    types = [[f"type-{q:03d}", f"other-{q:03d}"] for q in range(queues)]
    try:
        for r in range(repeats):
            start = time.perf_counter()
            for t in types:
                sum_backlog(queue.stats(t), t)
            per_queue.append(time.perf_counter() - start)
            cache = QueueCache()
            now = 1000.0 * (r + 1)
            start = time.perf_counter()
            for t in types:
                cache.backlog(dsn, queue, t, now=now, max_age=1.0)
            shared.append(time.perf_counter() - start)
            assert cache.statements == 1
            cache = QueueCache()
            start = time.perf_counter()
            for t in types:
                cache.backlog(dsn, queue, t, now=now, max_age=1.0)
                jobs_by_owner(queue, t)
            with_owners.append(time.perf_counter() - start)
    finally:
        queue.close()
    return per_queue, shared, with_owners


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--admin-dsn", default="postgresql://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--poll", type=float, default=1.0, help="spec.scaling.pollIntervalSeconds for figure 1")
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--history", type=int, default=100_000, help="finished jobs in the table for figure 2")
    args = parser.parse_args()

    name, dsn = create_database(args.admin_dsn)
    try:
        lat = backlog_to_patch(dsn, args.poll, args.rounds)
        print(f"backlog change -> Deployment patch (pollIntervalSeconds={args.poll:g}, {len(lat)} changes, kmock):")
        print(
            f"  median {statistics.median(lat) * 1000:.0f} ms, p90 {pct(lat, 0.9) * 1000:.0f} ms, "
            f"max {max(lat) * 1000:.0f} ms, min {min(lat) * 1000:.0f} ms"
        )
        with Queue(dsn) as q:
            fill(q, 100, 100, args.history)
        print(f"database: 100 job types x 100 pending, 3 running each, {args.history} finished jobs of history")
        for count in (1, 100):
            per_queue, shared, owners = db_time_per_round(dsn, count, 30 if count == 1 else 10)
            print(
                f"DB time per timer round, {count:>3} JobQueue(s): shared reading (what the operator does) "
                f"{statistics.median(shared) * 1000:.2f} ms (p90 {pct(shared, 0.9) * 1000:.2f}); "
                f"one stats statement per JobQueue {statistics.median(per_queue) * 1000:.2f} ms; "
                f"if every JobQueue also scaled down (running_by_owner) {statistics.median(owners) * 1000:.2f} ms"
            )
    finally:
        drop_database(args.admin_dsn, name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
