"""Figures for the ready ring (migration 23): what migrating a live queue blocks, and what the ring's
trigger adds to an enqueue.

1. Migration: a database at the version before 23 with N pending jobs (and as many finished); a
   producer inserts a job every few ms and a reader counts the pending jobs, each timing its
   statements, while `pgwork migrate` runs. Printed: the migration's wall time, the producer's
   longest insert (how long writers were blocked: the copy of the pending jobs into pgwork.ready
   under the trigger's SHARE ROW EXCLUSIVE lock) and the reader's longest read (readers are not
   blocked).
2. Enqueue: the same statements with the ring's insert trigger enabled and disabled, interleaved
   rounds, server time only: 2,000 single-row INSERTs in one DO block (each fires the statement
   trigger once) and one 10,000-row INSERT ... SELECT.

    python scripts/ready_ring_figures.py --dsn postgresql://postgres@127.0.0.1:5432/postgres [--pending 100000,1000000]
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time
from typing import Any

import psycopg
from psycopg import sql

from pgwork import sql_files
from pgwork.db import migrate
from tests.support.versions import at_version

SEED = """INSERT INTO pgwork.jobs (job_type, payload, idempotency_key)
SELECT 'seed', '{}', 'seed-' || g FROM generate_series(1, %(n)s) AS g"""
FINISHED = """INSERT INTO pgwork.jobs (job_type, payload, idempotency_key, status, attempt_count, completed_at)
SELECT 'done', '{}', 'done-' || g, 'succeeded', 1, now() FROM generate_series(1, %(n)s) AS g"""
SINGLES = """DO $$ BEGIN
  FOR i IN 1..2000 LOOP
    INSERT INTO pgwork.jobs (job_type, idempotency_key) VALUES ('one', 'one-' || i || '-' || random());
  END LOOP;
END $$"""
BULK = """INSERT INTO pgwork.jobs (job_type, idempotency_key)
SELECT 'bulk', 'bulk-' || g || '-' || random() FROM generate_series(1, 10000) AS g"""


def _database(admin: str, name: str) -> str:
    with psycopg.connect(admin, autocommit=True) as c:
        c.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
        c.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    return psycopg.conninfo.make_conninfo(admin, dbname=name)


def _drop(admin: str, name: str) -> None:
    with psycopg.connect(admin, autocommit=True) as c:
        c.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


class Timed(threading.Thread):
    """Runs `statement` in a loop on its own connection, keeping the longest it took."""

    def __init__(self, dsn: str, statement: str) -> None:
        super().__init__(daemon=True)
        self.dsn, self.statement = dsn, statement
        self.stop = threading.Event()
        self.longest = 0.0
        self.count = 0

    def run(self) -> None:
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            while not self.stop.is_set():
                t0 = time.perf_counter()
                conn.execute(self.statement.replace("#", str(self.count)))
                self.longest = max(self.longest, time.perf_counter() - t0)
                self.count += 1
                time.sleep(0.005)


def migration(admin: str, pending: int) -> None:
    name = "pgwork_ring_migration"
    dsn = _database(admin, name)
    try:
        [ring] = [m.version for m in sql_files.migrations() if m.name == "ready_ring"]
        at_version(dsn, ring - 1)
        with psycopg.connect(dsn, autocommit=True) as c:
            c.execute(SEED, {"n": pending})
            c.execute(FINISHED, {"n": pending})
            c.execute("VACUUM ANALYZE pgwork.jobs")
        writer = Timed(dsn, "INSERT INTO pgwork.jobs (job_type, idempotency_key) VALUES ('live', 'live-#')")
        reader = Timed(dsn, "SELECT count(*) FROM pgwork.jobs WHERE status = 'pending' AND job_type = 'live'")
        writer.start()
        reader.start()
        time.sleep(1.0)
        t0 = time.perf_counter()
        migrate(dsn)
        took = time.perf_counter() - t0
        time.sleep(1.0)
        writer.stop.set()
        reader.stop.set()
        writer.join()
        reader.join()
        with psycopg.connect(dsn) as c:
            row = c.execute(
                "SELECT (SELECT count(*) FROM pgwork.ready),"
                " (SELECT count(*) FROM pgwork.jobs WHERE status = 'pending')"
            ).fetchone()
        assert row is not None and row[0] == row[1], row
        print(
            f"migration 23 with {pending:,} pending (+{pending:,} finished): {took * 1000:.0f} ms in all; "
            f"longest insert meanwhile {writer.longest * 1000:.0f} ms, longest read {reader.longest * 1000:.0f} ms; "
            f"ready rows {row[0]:,}",
            flush=True,
        )
    finally:
        _drop(admin, name)


def _timed(conn: psycopg.Connection[Any], statement: str) -> float:
    t0 = time.perf_counter()
    conn.execute(statement)
    return time.perf_counter() - t0


def enqueue_cost(admin: str, rounds: int) -> None:
    name = "pgwork_ring_enqueue"
    dsn = _database(admin, name)
    try:
        migrate(dsn)
        found: dict[tuple[str, bool], list[float]] = {}
        with psycopg.connect(dsn, autocommit=True) as c:
            for _ in range(rounds):
                for on in (True, False):
                    verb = "ENABLE" if on else "DISABLE"
                    c.execute(sql.SQL("ALTER TABLE pgwork.jobs {} TRIGGER jobs_ready_enqueued").format(sql.SQL(verb)))
                    found.setdefault(("single", on), []).append(_timed(c, SINGLES) / 2000)
                    found.setdefault(("bulk", on), []).append(_timed(c, BULK) / 10000)
                    c.execute("TRUNCATE pgwork.jobs CASCADE")
            c.execute("ALTER TABLE pgwork.jobs ENABLE TRIGGER jobs_ready_enqueued")
        for kind in ("single", "bulk"):
            cells = []
            for on in (False, True):
                us = sorted(x * 1e6 for x in found[(kind, on)])
                label = "with" if on else "without"
                cells.append(f"{label} the trigger {statistics.median(us):.1f} [{us[0]:.1f}-{us[-1]:.1f}] us")
            print(f"enqueue, {kind} ({rounds} rounds, per job): " + "; ".join(cells), flush=True)
    finally:
        _drop(admin, name)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dsn", required=True, help="a superuser's connection string; databases are made and dropped")
    p.add_argument("--pending", default="100000,1000000")
    p.add_argument("--rounds", type=int, default=7)
    args = p.parse_args()
    with psycopg.connect(args.dsn) as c:
        row = c.execute("SHOW server_version").fetchone()
    print(f"PostgreSQL {row[0] if row else '?'}", flush=True)
    enqueue_cost(args.dsn, args.rounds)
    for n in (int(x) for x in args.pending.split(",") if x):
        migration(args.dsn, n)


if __name__ == "__main__":
    main()
