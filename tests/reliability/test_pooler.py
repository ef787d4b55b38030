"""Every path through a real PgBouncer (Debian's 1.18) in transaction mode, the pooler most
PostgreSQL users already run: the worker, the CLI commands (migrate included), the reaper and
prune, the operator's poll, Queue.wait (sync and async), bulk enqueue. The bouncer runs
`DEALLOCATE ALL` whenever a server connection goes back to its pool (`server_reset_query_always`),
so a statement a session prepared is gone by its next transaction: a client that relies on it
fails at its first reuse, every run, however the bouncer happens to hand out server connections."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
from collections.abc import Iterator

import psycopg
import pytest

from pgwork.db import Queue
from pgwork.db.aqueue import AsyncQueue
from pgwork.errors import PoolerNeeded
from pgwork.models import NewJob
from pgwork.operator.db import default_factory
from pgwork.worker.options import EXIT_POOLER
from tests.support import pgbouncer
from tests.support.workers import worker_env

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def bouncer(admin_dsn: str) -> Iterator[pgbouncer.Bouncer]:
    assert pgbouncer.available(), "pgbouncer is not installed (apt-get install -y pgbouncer; .ci/run does)"
    b = pgbouncer.start(admin_dsn, pool_size=4, round_robin=True, deallocate_each_transaction=True)
    yield b
    b.stop()


def pgwork_cli(*args: str, dsn: str, pooler: str | None = "transaction") -> subprocess.CompletedProcess[str]:
    env = worker_env(DATABASE_URL=dsn)
    env.pop("PGWORK_POOLER", None)
    if pooler:
        env["PGWORK_POOLER"] = pooler
    return subprocess.run(
        [sys.executable, "-m", "pgwork.cli", *args], capture_output=True, text=True, env=env, timeout=120, check=False
    )


def counts(dsn: str) -> dict[str, int]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute("SELECT status::text, count(*) FROM pgwork.jobs GROUP BY 1").fetchall()
    return {status: int(n) for status, n in rows}


def worker(dsn: str, pooler: str | None, batch: int = 5) -> subprocess.CompletedProcess[str]:
    return pgwork_cli(
        "worker", "--app", "pgwork_test_app", "--burst", "--batch", str(batch), "--concurrency", "4",
        "--metrics-port", "0", dsn=dsn, pooler=pooler,
    )  # fmt: skip


def test_a_worker_with_the_setting_drains_through_the_pooler(dsn: str, bouncer: pgbouncer.Bouncer) -> None:
    pooled = bouncer.pooled(dsn)
    with Queue(pooled, pooler="transaction") as q:
        q.enqueue_many([NewJob("noop", {"n": i}) for i in range(400)])
    out = worker(pooled, "transaction")
    assert out.returncode == 0, out.stderr[-3000:]
    assert "Traceback" not in out.stderr and "prepared statement" not in out.stderr
    assert "polling only, PGWORK_POOLER=transaction" in out.stderr
    assert counts(dsn) == {"succeeded": 400}
    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT max(attempt_count) FROM pgwork.jobs").fetchone() == (1,)


def test_a_worker_without_the_setting_releases_and_exits_naming_it(dsn: str, bouncer: pgbouncer.Bouncer) -> None:
    pooled = bouncer.pooled(dsn)
    with Queue(pooled, pooler="transaction") as q:
        q.enqueue_many([NewJob("noop", {"n": i}) for i in range(3000)])
    # Batches of 50 are claimed and written by prepared statements (a batch of up to 10 rides its
    # write and next claim on one simple-query message, which prepares nothing, issue 28). The
    # bouncer deallocates them after each transaction, so the worker meets the symptom on its
    # first reuse of one.
    out = worker(pooled, None, batch=50)
    assert out.returncode == EXIT_POOLER, out.stderr[-3000:]
    assert "Traceback" not in out.stderr
    errors = [line for line in out.stderr.splitlines() if " ERROR " in line]
    assert len(errors) == 1 and "PGWORK_POOLER=transaction" in errors[0], errors
    left = counts(dsn)
    assert "running" not in left and left.get("pending", 0) > 0, left


def test_cli_commands_reaper_and_prune_through_the_pooler(empty_dsn: str, bouncer: pgbouncer.Bouncer) -> None:
    pooled = bouncer.pooled(empty_dsn)
    steps = [
        ("migrate",),
        ("migrate",),  # again: nothing to apply, the lock taken and released in one transaction
        ("enqueue", "noop", "--payload", '{"n": 1}'),
        ("limits", "set", "noop", "--max-running", "3"),
        ("limits", "show"),
        ("stats",),
        ("running",),
        ("retrying",),
        ("dead",),
        ("reap",),
        ("prune", "--older-than", "1d"),
    ]
    for step in steps:
        out = pgwork_cli(*step, dsn=pooled, pooler=None) if step[0] == "stats" else pgwork_cli(*step, dsn=pooled)
        assert out.returncode == 0, (step, out.stderr)
    flagged = pgwork_cli("--pooler", "transaction", "stats", dsn=pooled, pooler=None)
    assert flagged.returncode == 0, flagged.stderr
    assert counts(empty_dsn) == {"pending": 1}


def test_many_statements_on_one_queue_and_bulk_enqueue(dsn: str, bouncer: pgbouncer.Bouncer) -> None:
    with Queue(bouncer.pooled(dsn), pool_size=2, pooler="transaction") as q:
        for _ in range(3):  # the staging table lives and dies inside one transaction
            ids = q.enqueue_many([NewJob("bulk", {"n": i}) for i in range(1500)])
            assert len(ids) == 1500
        for _ in range(20):
            q.stats()
            claimed = q.claim("w", job_types=["bulk"], limit=10)
            for job in claimed:
                q.succeed(job.lease, {"ok": True})
            q.reap()
    assert counts(dsn) == {"pending": 4300, "succeeded": 200}


def test_a_queue_without_the_setting_turns_prepares_off_and_says_so(dsn: str, bouncer: pgbouncer.Bouncer) -> None:
    # Other clients holding 0, 1 or 2 server connections in a transaction meanwhile, so the
    # Queue's statements land on different server connections.
    others = [psycopg.connect(bouncer.pooled(dsn), prepare_threshold=None) for _ in range(2)]
    with Queue(bouncer.pooled(dsn), pool_size=2, pooler="none") as q:
        seen: list[PoolerNeeded] = []
        for i in range(40):
            for other in others[: i % 3]:
                other.execute("SELECT 1")
            try:
                q.stats()
            except PoolerNeeded as exc:
                seen.append(exc)
            for other in others:
                other.commit()
    for other in others:
        other.close()
        assert seen and "PGWORK_POOLER=transaction" in str(seen[0])
        assert len(seen) == 1 and not q.prepares and q.pooler_symptom


def test_the_operators_poll_through_the_pooler(dsn: str, bouncer: pgbouncer.Bouncer) -> None:
    q = default_factory(bouncer.pooled(dsn))
    try:
        for _ in range(30):
            q.stats(["a", "b"], cap=1000)
            q.running_by_owner(["a", "b"])
    finally:
        q.close()


def _finish_soon(dsn: str, job_type: str) -> threading.Thread:
    def finish() -> None:
        with Queue(dsn, pool_size=1) as q:
            while not (claimed := q.claim("finisher", job_types=[job_type])):
                pass
            q.succeed(claimed[0].lease, {"done": True})

    thread = threading.Thread(target=finish, daemon=True)
    thread.start()
    return thread


@pytest.mark.parametrize("direct_listen", [False, True], ids=["polling", "listen-dsn"])
def test_queue_wait_through_the_pooler(dsn: str, bouncer: pgbouncer.Bouncer, direct_listen: bool) -> None:
    with Queue(bouncer.pooled(dsn), pooler="transaction", listen_dsn=dsn if direct_listen else "") as q:
        job_id = q.enqueue("waited", {})
        finisher = _finish_soon(dsn, "waited")
        assert q.wait(job_id, timeout=30, poll=0.05 if not direct_listen else 30) == {"done": True}
        finisher.join(10)


def test_async_queue_wait_through_the_pooler(dsn: str, bouncer: pgbouncer.Bouncer) -> None:
    async def scenario() -> object:
        async with await AsyncQueue.open(bouncer.pooled(dsn), pooler="transaction", listen_dsn="") as q:
            job_id = await q.enqueue("awaited", {})
            for _ in range(10):
                await q.job(job_id)
            finisher = _finish_soon(dsn, "awaited")
            value = await q.wait(job_id, timeout=30, poll=0.05)
            finisher.join(10)
            return value

    assert asyncio.run(scenario()) == {"done": True}
