"""The mvcc experiment's lanes, one process per system: a producer thread at a fixed offered rate
and a timed claim loop. `python -m pgwork.tools.lab.mvcc_lanes SYSTEM RATE SECONDS OUT` with
DATABASE_URL set and PGWORK_LAB_MVCC_START an epoch to start at (every lane starts together, once
connected); SYSTEM is `pgwork` (a probe claiming beside the real `pgwork worker` processes
that drain the queue: its claims are timed, it finishes each job with `succeed`) or `reference`
(the write-up's bare loop: SKIP LOCKED claim, unfenced complete, on its own table). Writes
{"produced", "claims": [[epoch, ms], ...]} as JSON to OUT.

The producer enqueues RATE/10 jobs every 100 ms on its own connection; a tick that falls behind
is caught up at once, so the offered rate holds whatever the claims cost.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from pgwork.db import Queue, connect
from pgwork.models import NewJob
from pgwork.tools.lab import NOOP_JOB_TYPE, query

JOB_TYPE = NOOP_JOB_TYPE  # what the lab's noop app (the workers' --app) handles
TICK = 0.1
# The pgwork probe claims this often: a sample of the claim's cost, not the queue's drain (the
# workers drain it).
PROBE_EVERY = 0.05


def produce(enqueue: Callable[[int], None], rate: float, until: float, produced: list[int]) -> None:
    start = time.monotonic()
    sent = 0
    while (now := time.monotonic()) < until:
        due = int((now - start) * rate) - sent
        if due > 0:
            enqueue(due)
            sent += due
            produced[0] = sent
        time.sleep(max(0.0, TICK - (time.monotonic() - now)))


def wait_for_start() -> None:
    """Until PGWORK_LAB_MVCC_START (epoch seconds): every lane, connected, starts together."""
    time.sleep(max(0.0, float(os.environ.get("PGWORK_LAB_MVCC_START", "0")) - time.time()))


def pgwork_lane(dsn: str, rate: float, seconds: float) -> dict[str, object]:
    produced = [0]
    claims: list[tuple[float, float]] = []
    with (
        Queue(dsn, pool_size=1, application_name="pgwork-lab-mvcc-producer") as producer,
        Queue(dsn, pool_size=1, application_name="pgwork-lab-mvcc-probe") as probe,
    ):
        wait_for_start()
        until = time.monotonic() + seconds

        def enqueue(n: int) -> None:
            producer.enqueue_many([NewJob(JOB_TYPE, {"n": i}) for i in range(n)])

        thread = threading.Thread(target=produce, args=(enqueue, rate, until, produced), daemon=True)
        thread.start()
        while time.monotonic() < until:
            t0 = time.perf_counter()
            got = probe.claim("mvcc-probe", job_types=[JOB_TYPE], limit=1)
            ms = (time.perf_counter() - t0) * 1000
            if got:
                claims.append((time.time(), ms))
                probe.succeed(got[0].lease, {"ok": True})
            time.sleep(PROBE_EVERY)
        thread.join()
    return {"produced": produced[0], "claims": claims}


def reference_lane(dsn: str, rate: float, seconds: float) -> dict[str, object]:
    produced = [0]
    claims: list[tuple[float, float]] = []
    with (
        connect(dsn, application_name="pgwork-lab-mvcc-ref-producer") as pconn,
        connect(dsn, application_name="pgwork-lab-mvcc-ref-loop") as conn,
    ):
        pconn.autocommit = True
        conn.autocommit = True
        wait_for_start()
        until = time.monotonic() + seconds

        def enqueue(n: int) -> None:
            pconn.execute(query("ref_enqueue"), {"count": n})

        thread = threading.Thread(target=produce, args=(enqueue, rate, until, produced), daemon=True)
        thread.start()
        while time.monotonic() < until:
            t0 = time.perf_counter()
            row = conn.execute(query("ref_claim"), {"owner": "ref-loop"}).fetchone()
            ms = (time.perf_counter() - t0) * 1000
            if row is None:
                time.sleep(0.005)  # empty: poll again
                continue
            claims.append((time.time(), ms))
            conn.execute(query("ref_complete"), {"id": row["id"]})
        thread.join()
    return {"produced": produced[0], "claims": claims}


def main() -> None:
    system, rate, seconds, out = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), Path(sys.argv[4])
    lane = {"pgwork": pgwork_lane, "reference": reference_lane}[system]
    out.write_text(json.dumps(lane(os.environ["DATABASE_URL"], rate, seconds)))


if __name__ == "__main__":
    main()
