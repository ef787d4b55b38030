"""SIGTERM while the database is down: the worker still exits within --grace plus a bounded
margin, and the job it could not release stays `running` with its lease for the reaper.

Runs against a private PostgreSQL (pgwork/tools/chaos/server.py) that this test stops and restarts;
the shared server is never touched."""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.rows import dict_row

from pgwork.db import Queue, migrate
from pgwork.tools.chaos import server as private
from tests.support.waiting import wait_for
from tests.support.workers import WorkerProcess, free_port, start_worker

GRACE = 3.0
# The bound docs/worker.md promises: --grace, then at most this long to give up on the writes.
MARGIN = 5.0


@pytest.fixture
def pg() -> Iterator[private.PrivateServer]:
    with private.running() as server:
        yield server


def refused(dsn: str) -> bool:
    try:
        psycopg.connect(dsn, connect_timeout=2).close()
    except psycopg.OperationalError:
        return True
    return False


def job_row(dsn: str, job_id: int) -> dict[str, Any]:
    with psycopg.connect(dsn, row_factory=dict_row) as conn:
        row = conn.execute("SELECT * FROM pgwork.jobs WHERE id = %s", (job_id,)).fetchone()
        assert row is not None
        return row


def counts(dsn: str) -> tuple[int, int]:
    with psycopg.connect(dsn) as conn:
        jobs = conn.execute("SELECT count(*) FROM pgwork.jobs").fetchone()
        results = conn.execute("SELECT count(*) FROM pgwork.job_results").fetchone()
        assert jobs is not None and results is not None
        return int(jobs[0]), int(results[0])


@pytest.mark.slow
def test_sigterm_with_the_database_down_exits_within_grace(pg: private.PrivateServer, tmp_path: Path) -> None:
    dsn = pg.dsn()
    migrate(dsn)
    with Queue(dsn, pool_size=1) as queue:
        job_id = queue.enqueue("sleep", {"seconds": 120})
    started: list[WorkerProcess] = []
    w = start_worker(
        dsn, tmp_path, started, "--grace", f"{GRACE:g}s", "--lease", "60s", "--heartbeat", "20s", "--poll", "0.2s"
    )
    try:
        wait_for(lambda: job_row(dsn, job_id)["status"] == "running", 30, what="the job to be claimed")
        before = job_row(dsn, job_id)
        pg._pg_ctl("-w", "-t", "30", "-m", "immediate", "stop")
        wait_for(lambda: refused(dsn), 10, what="the server to refuse connections")
        sent = time.monotonic()
        w.signal(signal.SIGTERM)
        code = w.wait(GRACE + MARGIN + 60)  # generous, so a slow exit is measured, not just failed
        took = time.monotonic() - sent
    finally:
        if w.alive():
            w.proc.kill()
            w.proc.wait(10)
    print(f"\nexit {code} after SIGTERM in {took:.2f}s (grace {GRACE:g}s, database down)")
    assert code == 0, w.log()
    assert took <= GRACE + MARGIN, f"took {took:.1f}s to exit\n{w.log()}"
    assert "Traceback" not in w.log()
    assert "could not release it before the shutdown deadline" in w.log()

    pg.start()
    after = job_row(dsn, job_id)
    assert after == before, "the worker wrote to the job although the database was down"
    assert after["status"] == "running" and after["lease_owner"] == w.id
    assert counts(dsn) == (1, 0)


@pytest.mark.slow
def test_a_second_sigterm_with_the_database_down_cuts_the_grace_short(
    pg: private.PrivateServer, tmp_path: Path
) -> None:
    dsn = pg.dsn()
    migrate(dsn)
    with Queue(dsn, pool_size=1) as queue:
        job_id = queue.enqueue("sleep", {"seconds": 120})
    started: list[WorkerProcess] = []
    w = start_worker(dsn, tmp_path, started, "--grace", "60s", "--lease", "60s", "--heartbeat", "20s")
    try:
        wait_for(lambda: job_row(dsn, job_id)["status"] == "running", 30, what="the job to be claimed")
        pg._pg_ctl("-w", "-t", "30", "-m", "immediate", "stop")
        w.signal(signal.SIGTERM)
        wait_for(lambda: "stop requested" in w.log(), 10, what="the first stop request to be logged")
        assert w.alive(), "exited long before the 60 s grace although the job still runs"
        sent = time.monotonic()
        w.signal(signal.SIGTERM)
        code = w.wait(60)
        took = time.monotonic() - sent
    finally:
        if w.alive():
            w.proc.kill()
            w.proc.wait(10)
    print(f"\nexit {code} {took:.2f}s after the second SIGTERM (grace 60s, database down)")
    assert code == 0, w.log()
    assert took <= MARGIN, f"took {took:.1f}s after the second signal\n{w.log()}"
    pg.start()
    row = job_row(dsn, job_id)
    assert row["status"] == "running" and row["lease_owner"] == w.id and row["last_error"] is None


def nowhere_dsn() -> str:
    """A DSN for a loopback port nothing listens on: every connection is refused at once."""
    return f"postgresql://postgres:pw@127.0.0.1:{free_port()}/postgres"


def test_a_worker_starting_with_the_database_down_gives_up_with_one_line(tmp_path: Path) -> None:
    started: list[WorkerProcess] = []
    w = start_worker(nowhere_dsn(), tmp_path, started, "--connect-patience", "3s")
    sent = time.monotonic()
    try:
        code = w.wait(30)
    finally:
        if w.alive():
            w.proc.kill()
            w.proc.wait(10)
    took = time.monotonic() - sent
    log = w.log()
    assert code == 2, log
    assert took < 15, f"gave up only after {took:.1f}s"
    last = log.strip().splitlines()[-1]
    assert last.startswith("pgwork worker: cannot connect to postgres@127.0.0.1:"), log
    assert "gave up after 3s of retries (--connect-patience)" in last
    assert ":pw@" not in log and "password=pw" not in log
    assert log.count("retrying in") >= 2, "each try should say so"
    assert "Traceback" not in log


@pytest.mark.slow
def test_sigterm_while_still_connecting_exits_at_once(tmp_path: Path) -> None:
    started: list[WorkerProcess] = []
    w = start_worker(nowhere_dsn(), tmp_path, started, "--connect-patience", "5m")
    try:
        wait_for(lambda: "retrying in 4s" in w.log(), 30, what="the worker to back off to 4 s")
        sent = time.monotonic()
        w.signal(signal.SIGTERM)
        code = w.wait(30)
        took = time.monotonic() - sent
    finally:
        if w.alive():
            w.proc.kill()
            w.proc.wait(10)
    assert code == 0, w.log()
    assert took < 2.0, f"took {took:.1f}s to answer SIGTERM while connecting"
    assert "Traceback" not in w.log()
