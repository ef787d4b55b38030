"""A live queue through a migration: producers inserting and workers claiming and finishing jobs
on their own connections while `migrate` runs, then every job accounted for (none lost, none
claimed twice). Used for migrations 23 (the ready ring) and 24 (concurrent index drops)."""

from __future__ import annotations

import threading
import time
from typing import Any

import psycopg
from psycopg import sql

from pgwork.db import migrate
from tests.support.ring import ready_is_pending
from tests.support.versions import at_version
from tests.support.waiting import wait_for

SEEDED = 5000

SEED = """
INSERT INTO pgwork.jobs (job_type, payload, idempotency_key, available_at)
SELECT 'seed', '{{}}', 'seed-' || g, now() - interval '1 minute' FROM generate_series(1, {pending}) AS g;
INSERT INTO pgwork.jobs (job_type, payload, idempotency_key, available_at)
SELECT 'later', '{{}}', 'later-' || g, now() + interval '1 hour' FROM generate_series(1, 50) AS g;
INSERT INTO pgwork.jobs (job_type, idempotency_key, status, attempt_count, started_at, lease_owner, lease_token,
                         lease_expires_at, heartbeat_at)
SELECT 'held', 'held-' || g, 'running', 1, now(), 'old-pod', gen_random_uuid(), now() + interval '1 hour', now()
  FROM generate_series(1, 20) AS g;
INSERT INTO pgwork.jobs (job_type, idempotency_key, status, attempt_count, completed_at)
SELECT 'done', 'done-' || g, (ARRAY['succeeded', 'dead', 'cancelled']::pgwork.job_status[])[1 + g % 3], 1, now()
  FROM generate_series(1, 300) AS g;
"""


class Load:
    """Producers inserting jobs and workers claiming and finishing them, each on its own
    autocommit connection, using only what both schema versions have."""

    def __init__(self, dsn: str, producers: int = 2, workers: int = 3) -> None:
        self.dsn = dsn
        self.producing = threading.Event()
        self.working = threading.Event()
        self.produced: list[list[int]] = [[] for _ in range(producers)]
        self.claimed: list[list[int]] = [[] for _ in range(workers)]
        self.errors: list[BaseException] = []
        self.threads = [threading.Thread(target=self._produce, args=(i,)) for i in range(producers)]
        self.threads += [threading.Thread(target=self._work, args=(i,)) for i in range(workers)]
        self.idle_rounds = [0] * workers

    def progress(self, claimed: int, produced: int = 0) -> bool:
        """Whether this many were claimed and produced; a thread's error ends the wait at once."""
        assert self.errors == []
        return sum(map(len, self.claimed)) >= claimed and sum(map(len, self.produced)) >= produced

    def start(self) -> None:
        self.producing.set()
        self.working.set()
        for t in self.threads:
            t.start()

    def _produce(self, n: int) -> None:
        try:
            with psycopg.connect(self.dsn, autocommit=True) as conn:
                i = 0
                while self.producing.is_set():
                    row = conn.execute(
                        "INSERT INTO pgwork.jobs (job_type, idempotency_key) VALUES ('live', %s) RETURNING id",
                        [f"p{n}-{i}"],
                    ).fetchone()
                    assert row is not None
                    self.produced[n].append(int(row[0]))
                    i += 1
        except BaseException as exc:
            self.errors.append(exc)

    def _work(self, n: int) -> None:
        try:
            with psycopg.connect(self.dsn, autocommit=True) as conn:
                while self.working.is_set():
                    rows: list[Any] = conn.execute(
                        "SELECT id, lease_token FROM pgwork.claim(%s, NULL, 50, 60)", [f"w{n}"]
                    ).fetchall()
                    if not rows:
                        self.idle_rounds[n] += 1
                        time.sleep(0.01)
                        continue
                    self.idle_rounds[n] = 0
                    self.claimed[n].extend(int(r[0]) for r in rows)
                    conn.execute(
                        "SELECT * FROM pgwork.succeed_many(%s::bigint[], %s::uuid[], %s::jsonb[])",
                        [[r[0] for r in rows], [r[1] for r in rows], ["{}"] * len(rows)],
                    )
        except BaseException as exc:
            self.errors.append(exc)

    def stop(self) -> None:
        self.producing.clear()
        self.working.clear()
        for t in self.threads:
            t.join(60)


def migrate_under_load(dsn: str, before: int, seeded: int = SEEDED) -> tuple[list[int], float, Load]:
    """`dsn` (empty) at version `before` with `seeded` ready jobs and some in every other state,
    migrated while the load runs; then the load drains the backlog. Returns (applied, seconds the
    migration took, the load)."""
    at_version(dsn, before)
    with psycopg.connect(dsn) as conn:
        conn.execute(sql.SQL(SEED).format(pending=sql.Literal(seeded)))
    load = Load(dsn)
    load.start()
    try:
        wait_for(lambda: load.progress(200, 50), what="load")
        started = time.perf_counter()
        applied = migrate(dsn)
        took = time.perf_counter() - started
        claimed_then, produced_then = sum(map(len, load.claimed)), sum(map(len, load.produced))
        # The claim after the migration at work, and producers still enqueueing.
        wait_for(lambda: load.progress(claimed_then + 500, produced_then + 200), what="writes after the migration")
        load.producing.clear()
        wait_for(lambda: load.progress(0) and min(load.idle_rounds) >= 3, what="the backlog drained")
    finally:
        load.stop()
    assert load.errors == []
    return applied, took, load


def assert_every_job_once(dsn: str, load: Load, seeded: int = SEEDED) -> None:
    """Every seeded and produced job succeeded exactly once; the others are as seeded."""
    produced = [i for p in load.produced for i in p]
    claimed = [i for c in load.claimed for i in c]
    assert len(claimed) == len(set(claimed)), "a job was claimed twice"
    with psycopg.connect(dsn) as conn:
        rows = conn.execute("SELECT job_type, status::text, count(*) FROM pgwork.jobs GROUP BY 1, 2").fetchall()
        done = {r[0] for r in conn.execute("SELECT id FROM pgwork.jobs WHERE status = 'succeeded'").fetchall()}
    counts = {(t, s): n for t, s, n in rows}
    assert counts == {
        ("seed", "succeeded"): seeded,
        ("live", "succeeded"): len(produced),
        ("later", "pending"): 50,
        ("held", "running"): 20,
        ("done", "succeeded"): 100,
        ("done", "dead"): 100,
        ("done", "cancelled"): 100,
    }
    assert set(claimed) <= done and set(produced) <= done
    assert len(claimed) == seeded + len(produced)
    assert ready_is_pending(dsn) == 50
