"""The mvcc experiment's pgqueuer lane (`pip install 'pgwork[peers]'`), with asyncpg, its default
driver: a producer task at a fixed offered rate (RATE/10 jobs every 100 ms, on its own connection)
and a QueueManager draining the queue, its every `dequeue` timed in place.
`python -m pgwork.tools.lab.mvcc_pgqueuer RATE SECONDS OUT` with DATABASE_URL set; writes
{"produced", "claims": [[epoch, ms], ...]} (dequeues that returned jobs) to OUT."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

ENTRYPOINT = "lab-mvcc"
TICK = 0.1


async def connect(dsn: str, application_name: str) -> Any:
    """An asyncpg connection from a libpq DSN, URL or key=value (the embedded server's is the latter,
    with a Unix-socket host, which asyncpg's own DSN parser does not take)."""
    import asyncpg
    from psycopg.conninfo import conninfo_to_dict

    p = conninfo_to_dict(dsn)
    return await asyncpg.connect(
        host=p.get("host"),
        port=int(p.get("port") or 5432),
        user=p.get("user"),
        password=p.get("password"),
        database=p.get("dbname"),
        server_settings={"application_name": application_name},
    )


async def install(dsn: str) -> None:
    from pgqueuer.db import AsyncpgDriver
    from pgqueuer.queries import Queries

    conn = await connect(dsn, "pgwork-lab-mvcc-pgq-install")
    queries = Queries(AsyncpgDriver(conn))
    if not await queries.has_table("pgqueuer"):
        await queries.install()
    await conn.execute("TRUNCATE pgqueuer, pgqueuer_log")
    await conn.close()


async def lane(dsn: str, rate: float, seconds: float) -> dict[str, Any]:
    from pgqueuer.db import AsyncpgDriver
    from pgqueuer.qm import QueueManager
    from pgqueuer.queries import Queries

    await install(dsn)
    pconn = await connect(dsn, "pgwork-lab-mvcc-pgq-producer")
    cconn = await connect(dsn, "pgwork-lab-mvcc-pgq-consumer")
    producer = Queries(AsyncpgDriver(pconn))
    qm = QueueManager(Queries(AsyncpgDriver(cconn)))
    claims: list[tuple[float, float]] = []
    dequeue = qm.queries.dequeue

    async def timed(*args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        jobs = await dequeue(*args, **kwargs)
        if jobs:
            claims.append((time.time(), (time.perf_counter() - t0) * 1000))
        return jobs

    object.__setattr__(qm.queries, "dequeue", timed)  # every dequeue of its own loop, timed

    @qm.entrypoint(ENTRYPOINT)
    async def noop(job: Any) -> None:
        return None

    produced = 0
    time.sleep(max(0.0, float(os.environ.get("PGWORK_LAB_MVCC_START", "0")) - time.time()))  # lanes start together
    start = time.monotonic()
    until = start + seconds

    async def produce() -> None:
        nonlocal produced
        while (now := time.monotonic()) < until:
            due = int((now - start) * rate) - produced
            if due > 0:
                await producer.enqueue([ENTRYPOINT] * due, [None] * due, [0] * due)
                produced += due
            await asyncio.sleep(max(0.0, TICK - (time.monotonic() - now)))
        qm.shutdown.set()

    task = asyncio.create_task(produce())
    await qm.run(dequeue_timeout=timedelta(seconds=1))
    await task
    await pconn.close()
    await cconn.close()
    return {"produced": produced, "claims": claims}


def main() -> None:
    rate, seconds, out = float(sys.argv[1]), float(sys.argv[2]), Path(sys.argv[3])
    out.write_text(json.dumps(asyncio.run(lane(os.environ["DATABASE_URL"], rate, seconds))))


if __name__ == "__main__":
    main()
