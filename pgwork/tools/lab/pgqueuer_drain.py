"""A peer for the worker-drain experiment: pgqueuer (`pip install 'pgwork[peers]'`) draining
trivial jobs in its own process. `python -m pgwork.tools.lab.pgqueuer_drain JOBS BATCH` with
DATABASE_URL set; prints the jobs/s from its first dequeue to the drain's end, timed here (pgqueuer
deletes finished rows, so the rows cannot time it)."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from datetime import timedelta
from typing import Any

ENTRYPOINT = "lab-peer-noop"


async def drain(dsn: str, jobs: int, batch: int) -> dict[str, Any]:
    import psycopg
    from pgqueuer import types
    from pgqueuer.db import PsycopgDriver
    from pgqueuer.qm import QueueManager
    from pgqueuer.queries import Queries

    conn = await psycopg.AsyncConnection.connect(dsn, autocommit=True)
    driver = PsycopgDriver(conn)
    queries = Queries(driver)
    if not await queries.has_table("pgqueuer"):
        await queries.install()
    await conn.execute("TRUNCATE pgqueuer, pgqueuer_log")
    for start in range(0, jobs, 5000):
        n = min(5000, jobs - start)
        await queries.enqueue([ENTRYPOINT] * n, [None] * n, [0] * n)
    done = 0
    qm = QueueManager(queries)

    @qm.entrypoint(ENTRYPOINT)
    async def noop(job: Any) -> None:
        nonlocal done
        done += 1

    started = time.perf_counter()
    await qm.run(batch_size=batch, mode=types.QueueExecutionMode.drain, dequeue_timeout=timedelta(seconds=1))
    seconds = time.perf_counter() - started
    left = await conn.execute("SELECT count(*) FROM pgqueuer")
    row = await left.fetchone()
    await conn.close()
    return {"jobs": jobs, "done": done, "left": int(row[0]) if row else -1, "seconds": seconds}


def main() -> None:
    jobs, batch = int(sys.argv[1]), int(sys.argv[2])
    print(json.dumps(asyncio.run(drain(os.environ["DATABASE_URL"], jobs, batch))))


if __name__ == "__main__":
    main()
