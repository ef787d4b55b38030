"""Figures for migration 24 (the old claim indexes dropped CONCURRENTLY, outside a transaction):
how long writers wait while it runs on a big queue.

A database at version 23 with N pending jobs (and as many finished). In each round a producer
inserts a job every few ms and a worker claims and finishes, each timing its statements; a report
opens a transaction that reads pgwork.jobs and keeps it open for --hold seconds; meanwhile the two
indexes are dropped either by `pgwork migrate` (migration 24: DROP INDEX CONCURRENTLY) or, as the
control, by a plain `DROP INDEX` in a transaction (what a migration inside the migrating
transaction does), or, for the noise floor, not at all while the report holds. Printed per way,
median [min-max] over the rounds (interleaved): the drop's wall time, the producer's and the
worker's longest statement while it ran. Between rounds the indexes
are built again (CONCURRENTLY, untimed) and version 24 is forgotten.

    python scripts/online_migration_figures.py --dsn postgresql://postgres@127.0.0.1:5432/postgres [--pending 1000000]
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time

import psycopg
from psycopg import sql

from pgwork import sql_files
from pgwork.db import migrate
from tests.support.versions import at_version

SEED = """INSERT INTO pgwork.jobs (job_type, payload, idempotency_key, available_at)
SELECT 'seed', '{}', 'seed-' || g, now() + interval '1 day' FROM generate_series(1, %(n)s) AS g"""
FINISHED = """INSERT INTO pgwork.jobs (job_type, payload, idempotency_key, status, attempt_count, completed_at)
SELECT 'done', '{}', 'done-' || g, 'succeeded', 1, now() FROM generate_series(1, %(n)s) AS g"""
REBUILD = [
    "CREATE INDEX CONCURRENTLY IF NOT EXISTS jobs_claim_idx ON pgwork.jobs (priority, available_at, id)"
    " WHERE status = 'pending'",
    "CREATE INDEX CONCURRENTLY IF NOT EXISTS jobs_claim_type_idx ON pgwork.jobs (job_type, priority, available_at, id)"
    " WHERE status = 'pending'",
]
PLAIN = "DROP INDEX pgwork.jobs_claim_idx, pgwork.jobs_claim_type_idx"


class Timed(threading.Thread):
    """Runs `statements` in a loop on its own connection, keeping the longest it took."""

    def __init__(self, dsn: str, *statements: str) -> None:
        super().__init__(daemon=True)
        self.dsn, self.statements = dsn, statements
        self.stop = threading.Event()
        self.longest = 0.0
        self.count = 0

    def run(self) -> None:
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            while not self.stop.is_set():
                for statement in self.statements:
                    t0 = time.perf_counter()
                    conn.execute(statement.replace("#", f"{id(self)}-{self.count}"))
                    self.longest = max(self.longest, time.perf_counter() - t0)
                self.count += 1
                time.sleep(0.005)


def _round(dsn: str, way: str, hold: float) -> tuple[float, float, float]:
    producer = Timed(dsn, "INSERT INTO pgwork.jobs (job_type, idempotency_key) VALUES ('live', 'live-#')")
    worker = Timed(
        dsn,
        "SELECT pgwork.succeed_many(array_agg(id), array_agg(lease_token), array_agg('{}'::jsonb))"
        " FROM pgwork.claim('w', NULL, 5, 60)",
    )
    producer.start()
    worker.start()
    time.sleep(0.5)
    with psycopg.connect(dsn) as report:
        report.execute("SELECT count(*) FROM pgwork.jobs WHERE status = 'succeeded'")  # a report's snapshot and lock
        timer = threading.Timer(hold, report.rollback)
        timer.start()
        producer.longest = worker.longest = 0.0
        t0 = time.perf_counter()
        if way == "migrate":
            assert migrate(dsn) == [24]
        elif way == "none":
            timer.join()
        else:
            with psycopg.connect(dsn) as c:
                c.execute(PLAIN)
        took = time.perf_counter() - t0
        timer.join()
    for t in (producer, worker):  # a statement blocked by the drop counts once it has finished
        t.stop.set()
        t.join()
    during = (producer.longest, worker.longest)
    with psycopg.connect(dsn, autocommit=True) as c:
        for statement in REBUILD:  # no-ops after "none"
            c.execute(statement)
        c.execute("DELETE FROM pgwork.schema_version WHERE version = 24")
    return took, *during


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dsn", required=True, help="a superuser's connection string; a database is made and dropped")
    p.add_argument("--pending", type=int, default=1_000_000)
    p.add_argument("--hold", type=float, default=2.0, help="seconds the report keeps its transaction open")
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    name = "pgwork_online_migration"
    with psycopg.connect(args.dsn, autocommit=True) as c:
        row = c.execute("SHOW server_version").fetchone()
        c.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
        c.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    print(f"PostgreSQL {row[0] if row else '?'}", flush=True)
    dsn = psycopg.conninfo.make_conninfo(args.dsn, dbname=name)
    try:
        [drops] = [m.version for m in sql_files.migrations() if m.name == "drop_old_claim_indexes"]
        at_version(dsn, drops - 1)
        with psycopg.connect(dsn, autocommit=True) as c:
            c.execute(SEED, {"n": args.pending})
            c.execute(FINISHED, {"n": args.pending})
            c.execute("VACUUM ANALYZE pgwork.jobs")
        found: dict[str, list[tuple[float, float, float]]] = {"none": [], "migrate": [], "plain": []}
        for _ in range(args.rounds):
            for way, rows in found.items():
                rows.append(_round(dsn, way, args.hold))

        def cell(xs: list[float]) -> str:
            ms = sorted(x * 1000 for x in xs)
            return f"{statistics.median(ms):.0f} [{ms[0]:.0f}-{ms[-1]:.0f}] ms"

        for way, rows in found.items():
            label = {
                "none": "nothing dropped (the noise floor)",
                "migrate": "pgwork migrate (24, CONCURRENTLY)",
                "plain": "plain DROP INDEX (control)",
            }[way]
            print(
                f"{args.pending:,} pending, report holding {args.hold:g} s, {label}: "
                f"drop {cell([r[0] for r in rows])}; "
                f"longest insert {cell([r[1] for r in rows])}; longest claim+finish {cell([r[2] for r in rows])}",
                flush=True,
            )
    finally:
        with psycopg.connect(args.dsn, autocommit=True) as c:
            c.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


if __name__ == "__main__":
    main()
