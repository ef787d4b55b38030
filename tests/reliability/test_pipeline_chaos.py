"""The quick form of a pipeline under chaos: documents split into pages (follow-ups written with the
finish), pages read by workers that are SIGKILLed and replaced, a database restarted (cleanly and as
after a crash), a reaper returning lapsed leases, and a merge per document that waits for every page. Exactly
one merge per document runs to success, after all its pages, with every page's result; no page is
created twice. (The heavy form: PGWORK_PIPELINE_CHAOS="docs=20,pages=200".)"""

from __future__ import annotations

import os
import random
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from pgwork.db import Queue, migrate
from pgwork.models import NewJob
from pgwork.reaper import Reaper, ReaperConfig
from pgwork.tools.chaos import server
from tests.support.waiting import wait_for
from tests.support.workers import WorkerProcess, start_worker

# CI runs fan-out 200 (the size) for 2 documents; the heavy form: PGWORK_PIPELINE_CHAOS="docs=20,pages=200".
_SIZE = dict(
    part.split("=", 1) for part in os.environ.get("PGWORK_PIPELINE_CHAOS", "docs=2,pages=200").split(",") if "=" in part
)
DOCS = int(_SIZE.get("docs", 2))
PAGES = int(_SIZE.get("pages", 200))
# About 54 s of page work in all (6 s of the 9 worker slots' time) whatever the size, so the faults
# below fall while pages run.
PAGE_SECONDS = round(54.0 / (DOCS * PAGES), 3)


@pytest.fixture
def chaos_dsn(private_server: server.PrivateServer) -> Iterator[str]:
    name = f"pipeline_chaos_{random.randrange(10**8)}"
    with psycopg.connect(private_server.dsn(), autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    dsn = private_server.dsn(name)
    migrate(dsn)
    yield dsn
    with psycopg.connect(private_server.dsn(), autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


def _merges_done(dsn: str) -> bool:
    try:
        with psycopg.connect(dsn, connect_timeout=2) as conn:
            row = conn.execute(
                "SELECT count(*) FROM pgwork.jobs WHERE job_type = 'doc-merge' AND status = 'succeeded'"
            ).fetchone()
    except psycopg.OperationalError:
        return False
    return row is not None and row[0] >= DOCS


def test_one_merge_per_document_under_kills_and_restarts(
    private_server: server.PrivateServer, chaos_dsn: str, tmp_path: Path
) -> None:
    rng = random.Random(27)
    started: list[WorkerProcess] = []
    args = ("--app", "pgwork_pipeline_app", "--lease", "2s", "--heartbeat", "0.5s", "--concurrency", "3")
    workers = [start_worker(chaos_dsn, tmp_path, started, *args, worker_id=f"p{n}") for n in range(3)]
    with Queue(chaos_dsn) as q:
        q.enqueue_many(
            [NewJob("doc-split", {"doc": f"d{d}", "pages": PAGES, "page_seconds": PAGE_SECONDS}) for d in range(DOCS)]
        )
    reaper = Reaper(lambda: Queue(chaos_dsn, pool_size=1), ReaperConfig(every=0.5, loop_for=None))
    stop = threading.Event()
    reaping = threading.Thread(target=reaper.loop, args=(stop,), daemon=True)
    reaping.start()
    faults = {"kill_worker": 0, "restart_db": 0, "crash_db": 0}
    try:
        # The pages take about 6 s of the 9 workers' time: the faults fall while they run.
        for step in range(1, 9):
            time.sleep(0.7)
            victim = rng.randrange(len(workers))
            workers[victim].signal(signal.SIGKILL)
            workers[victim].wait(10)
            workers[victim] = start_worker(chaos_dsn, tmp_path, started, *args, worker_id=f"p{len(started)}")
            faults["kill_worker"] += 1
            if step == 2:
                private_server.restart("immediate")  # a crash: no shutdown checkpoint, recovery on start
                faults["crash_db"] += 1
            if step == 5:
                private_server.restart("fast")
                faults["restart_db"] += 1
        wait_for(lambda: _merges_done(chaos_dsn), 120, what="every document's merge")
    finally:
        stop.set()
        reaping.join(10)
        reaper.close()
        for w in started:
            if w.alive():
                w.signal(signal.SIGKILL)
                w.wait(10)
    assert faults["kill_worker"] == 8 and faults["restart_db"] == 1 and faults["crash_db"] == 1, faults
    with psycopg.connect(chaos_dsn) as conn:
        jobs = conn.execute(
            "SELECT job_type, payload->>'doc', status::text, count(*) FROM pgwork.jobs GROUP BY 1, 2, 3"
        ).fetchall()
        reclaimed = conn.execute("SELECT count(*) FROM pgwork.jobs WHERE last_error LIKE '%reclaimed from%'").fetchone()
        merged = conn.execute(
            "SELECT r.result FROM pgwork.job_results AS r WHERE r.job_type = 'doc-merge' ORDER BY r.result->>'doc'"
        ).fetchall()
    counts = {(t, d, s): n for t, d, s, n in jobs}
    assert reclaimed is not None and reclaimed[0] >= 1  # the kills fell on jobs in flight
    for d in range(DOCS):
        doc = f"d{d}"
        assert counts.get(("doc-split", doc, "succeeded")) == 1, counts
        assert counts.get(("doc-page", doc, "succeeded")) == PAGES, counts  # each page created once
        assert counts.get(("doc-merge", doc, "succeeded")) == 1, counts  # one merge, run to success
    assert sum(counts.values()) == DOCS * (PAGES + 2)  # nothing else: no duplicate, nothing stuck
    assert [m for (m,) in merged] == [
        {"doc": f"d{d}", "pages": list(range(PAGES)), "parents": PAGES} for d in range(DOCS)
    ]
