"""A peer for the worker-drain experiment: pgqueuer (`pip install 'pgwork[peers]'`) draining
trivial jobs in its own process. `python -m pgwork.tools.lab.pgqueuer_drain JOBS BATCH [DRIVER]` with
DATABASE_URL set; DRIVER is `asyncpg` (pgqueuer's default and recommended driver) or `psycopg`.

Timed from the database, as pgwork's drains are: pgqueuer deletes finished rows, but its log table
keeps a `picked` and a `successful` row per job, each stamped by the server; the span is the first
pick to the last success. The clock around `qm.run` is printed beside it (it also counts the drain's
final empty dequeue and shutdown), never used for the ratio."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from datetime import timedelta
from typing import Any

ENTRYPOINT = "lab-peer-noop"
GATE_ENV = "PGWORK_LAB_DRAIN_GATE"
DRIVERS = ("asyncpg", "psycopg")
ASYNCPG_KEYS = ("host", "port", "user", "password", "dbname")
SPAN = """
SELECT count(*) FILTER (WHERE status = 'successful') AS logged,
       extract(epoch FROM max(created) FILTER (WHERE status = 'successful')
                        - min(created) FILTER (WHERE status = 'picked'))::float8 AS seconds,
       (SELECT count(*) FROM pgqueuer) AS left_over
FROM pgqueuer_log
"""


async def _connect(dsn: str, driver: str) -> tuple[Any, Any]:
    """(pgqueuer driver, a closer) for the named client library."""
    if driver == "asyncpg":
        import asyncpg
        from pgqueuer.db import AsyncpgDriver
        from psycopg.conninfo import conninfo_to_dict

        # asyncpg reads URLs only; the lab may hand a key=value DSN, so pass its parts.
        parts = {k: str(v) for k, v in conninfo_to_dict(dsn).items()}
        args = {"database" if k == "dbname" else k: v for k, v in parts.items() if k in ASYNCPG_KEYS}
        aconn = await asyncpg.connect(**args)
        return AsyncpgDriver(aconn), aconn.close
    import psycopg
    from pgqueuer.db import PsycopgDriver

    pconn = await psycopg.AsyncConnection.connect(dsn, autocommit=True)
    return PsycopgDriver(pconn), pconn.close


async def drain(dsn: str, jobs: int, batch: int, driver_name: str) -> dict[str, Any]:
    from pgqueuer import types
    from pgqueuer.qm import QueueManager
    from pgqueuer.queries import Queries

    driver, close = await _connect(dsn, driver_name)
    queries = Queries(driver)
    if not await queries.has_table("pgqueuer"):
        await queries.install()
    await driver.execute("TRUNCATE pgqueuer, pgqueuer_log")
    for start in range(0, jobs, 5000):
        n = min(5000, jobs - start)
        await queries.enqueue([ENTRYPOINT] * n, [None] * n, [0] * n)
    await driver.execute("ANALYZE pgqueuer")  # as pgwork's drains claim with fresh statistics
    if os.environ.get(GATE_ENV):
        # scripts/cpu_per_job.py counts the drain's CPU apart from the enqueue's: it reads the CPU used
        # so far when told the jobs are in, then lets the drain start.
        print("enqueued", flush=True)
        sys.stdin.readline()
    done = 0
    qm = QueueManager(queries)

    @qm.entrypoint(ENTRYPOINT)
    async def noop(job: Any) -> None:
        nonlocal done
        done += 1

    started = time.perf_counter()
    await qm.run(batch_size=batch, mode=types.QueueExecutionMode.drain, dequeue_timeout=timedelta(seconds=1))
    clock = time.perf_counter() - started
    rows = await driver.fetch(SPAN)
    await close()
    span = dict(rows[0])  # both drivers answer rows keyed by column name
    return {
        "jobs": jobs,
        "done": done,
        "logged": int(span["logged"]),
        "left": int(span["left_over"]),
        "seconds": float(span["seconds"] or 0.0),
        "clock_seconds": clock,
    }


def main() -> None:
    jobs, batch = int(sys.argv[1]), int(sys.argv[2])
    driver = sys.argv[3] if len(sys.argv) > 3 else "asyncpg"
    if driver not in DRIVERS:
        raise SystemExit(f"pgqueuer_drain: driver {driver!r} is not one of {', '.join(DRIVERS)}")
    print(json.dumps(asyncio.run(drain(os.environ["DATABASE_URL"], jobs, batch, driver))))


if __name__ == "__main__":
    main()
