"""How much of the ready ring a claim walks while a snapshot is held elsewhere: one real `pgwork worker`
drains jobs offered at a fixed rate, another session holds a REPEATABLE READ snapshot (it read only
pg_class: case b of the mvcc experiment), and the ring's segments are sampled twice a second.

    PYTHONPATH=CHECKOUT python scripts/ring_rotation_watch.py LABEL [--seconds 60] [--rate 150]
        [--admin-dsn postgresql://postgres@127.0.0.1:5432/postgres]

Prints the median and max of the segments holding rows on disk and of the ring's heap pages: what
rotation leaves for the claim to walk (a segment's dead index entries go only with its TRUNCATE while the
snapshot is held). Run it from two checkouts at once to compare them on the same machine load. It
creates and drops its own database, pgwork_lab_ring_LABEL.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import threading
import time

import psycopg
from psycopg import sql

from pgwork.db import Queue, migrate
from pgwork.dsn import with_dbname
from pgwork.models import NewJob
from pgwork.tools.lab import NOOP_JOB_TYPE

SEGMENTS = "SELECT pg_relation_size(format('pgwork.ready_%s', s)::regclass) / 8192 FROM generate_series(0, 7) AS s"


def produce(queue: Queue, rate: float, stop: threading.Event) -> None:
    """Enqueue at `rate` jobs/s, 15 at a time, on a fixed schedule (no drift)."""
    n, started = 0, time.monotonic()
    while not stop.is_set():
        delay = started + n / rate - time.monotonic()
        if delay > 0:
            stop.wait(delay)
        queue.enqueue_many([NewJob(NOOP_JOB_TYPE, {"n": n + i}) for i in range(15)])
        n += 15


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("label")
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--rate", type=float, default=150.0)
    parser.add_argument("--admin-dsn", default="postgresql://postgres@127.0.0.1:5432/postgres")
    args = parser.parse_args()
    name = f"pgwork_lab_ring_{args.label}"
    drop = sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
    with psycopg.connect(args.admin_dsn, autocommit=True) as admin:
        admin.execute(drop)
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    dsn = with_dbname(args.admin_dsn, name)
    migrate(dsn)
    queue = Queue(dsn, pool_size=2)
    holder = psycopg.connect(dsn)
    holder.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
    holder.execute("SELECT count(*) FROM pg_class")
    command = [sys.executable, "-m", "pgwork.cli", "worker", "--app", "pgwork.tools.lab.noop_app", "--id", "watch"]
    worker = subprocess.Popen(
        [*command, "--job-types", NOOP_JOB_TYPE, "--concurrency", "4"],
        env={**os.environ, "DATABASE_URL": dsn},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    stop = threading.Event()
    producer = threading.Thread(target=produce, args=(queue, args.rate, stop), daemon=True)
    producer.start()
    samples: list[tuple[int, int]] = []
    try:
        stop.wait(15.0)  # the worker starts and the ring fills past its first boundaries
        with psycopg.connect(dsn, autocommit=True) as conn:
            end = time.monotonic() + args.seconds
            while time.monotonic() < end:
                pages = [int(r[0]) for r in conn.execute(SEGMENTS).fetchall()]
                samples.append((sum(1 for p in pages if p > 0), sum(pages)))
                stop.wait(0.5)
    finally:
        stop.set()
        producer.join()
        worker.terminate()
        worker.wait()
        holder.close()
        queue.close()
        with psycopg.connect(args.admin_dsn, autocommit=True) as admin:
            admin.execute(drop)
    segments = [s for s, _ in samples]
    pages = [p for _, p in samples]
    print(
        f"{args.label}: segments holding rows median {statistics.median(segments)} max {max(segments)}; "
        f"ring heap pages median {statistics.median(pages)} max {max(pages)}; {len(samples)} samples, "
        f"{args.rate:g} jobs/s, load {os.getloadavg()[0]:.1f}"
    )


if __name__ == "__main__":
    main()
