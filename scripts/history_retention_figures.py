"""Figures for migration 27 (finished jobs archived into pgwork.job_history by UTC day; retention
drops whole days): what retention costs by dropping partitions against `pgwork prune`'s DELETE,
and what the claim beside it sees.

On a throwaway database (migrated to the latest version):

1. Retention. For each --sizes N: N archived jobs spread over --days day partitions (loaded with
   one INSERT ... SELECT generate_series straight into job_history, untimed), then
   `Queue.drop_history` drops them all. Then --prune-rows finished jobs in pgwork.jobs moved by
   `Queue.archive`, and as many again deleted by `Queue.prune` (`pgwork prune`'s way; batches of
   10,000 both). Beside each, a loop enqueues a job and
   times claim + finish (two statements) on its own connection; its p50/p99/max are printed for
   the --window seconds before, the operation itself, and the --window seconds after.
2. The move's cost per job. --rounds interleaved rounds (the order alternating): --move-rows
   finished jobs loaded into pgwork.jobs, then moved by `Queue.archive` (DELETE ... RETURNING into
   job_history) or deleted by `Queue.prune`, each timed; jobs is VACUUMed before each, and the
   history dropped after each archive. Printed as microseconds per job, median [min-max].

    python scripts/history_retention_figures.py --dsn postgresql://postgres@127.0.0.1:5432/postgres \
        [--sizes 1000000,10000000] [--prune-rows 1000000] [--move-rows 100000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import threading
import time
import uuid
from datetime import UTC, date, datetime, timedelta

import psycopg
from psycopg import sql

from pgwork.db import Queue, migrate
from pgwork.dsn import with_dbname

FIRST_DAY = date(2026, 10, 1)
HISTORY = """INSERT INTO pgwork.job_history (id, job_type, payload, status, priority, attempt_count, max_attempts,
    created_at, available_at, started_at, completed_at, idempotency_key, trace_context, is_unique, has_children,
    runs_after_failure)
SELECT %(base)s + g, 'done', '{}', 'succeeded', 100, 1, 5, c, c, c, c, 'h-' || (%(base)s + g), '{}', false, false, false
  FROM generate_series(1, %(n)s) AS g,
       LATERAL (SELECT %(first)s::timestamptz + make_interval(days => g %% %(days)s, secs => (g / %(days)s) %% 86000)
                AS c) AS t"""
FINISHED = """INSERT INTO pgwork.jobs (job_type, payload, idempotency_key, status, attempt_count, started_at,
    completed_at)
SELECT 'done', '{}', %(tag)s || g, 'succeeded', 1, c, c
  FROM generate_series(1, %(n)s) AS g, LATERAL (SELECT now() - interval '20 days' + make_interval(secs => g %% 86000)
       AS c) AS t"""


class ClaimLoop(threading.Thread):
    """Enqueue one job, then claim it and finish it (timed together), again and again."""

    def __init__(self, dsn: str) -> None:
        super().__init__(daemon=True)
        self.dsn = dsn
        self.stop = threading.Event()
        self.samples: list[tuple[float, float]] = []  # (monotonic start, seconds)

    def run(self) -> None:
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            n = 0
            while not self.stop.is_set():
                n += 1
                conn.execute("INSERT INTO pgwork.jobs (job_type, idempotency_key) VALUES ('live', %s)", (f"l{n}",))
                t0 = time.monotonic()
                row = conn.execute("SELECT id, lease_token FROM pgwork.claim('w', ARRAY['live'], 1, 60)").fetchone()
                if row is not None:
                    conn.execute(
                        "SELECT pgwork.succeed_many(ARRAY[%s]::bigint[], ARRAY[%s]::uuid[], ARRAY['{}'::jsonb])", row
                    )
                self.samples.append((t0, time.monotonic() - t0))
                time.sleep(0.002)

    def between(self, start: float, end: float) -> list[float]:
        return [s for t, s in self.samples if start <= t < end or (t < start and t + s > start)]


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def _window(label: str, values: list[float]) -> str:
    ms = [v * 1000 for v in values]
    return (
        f"  {label:<7} n={len(ms):<5} p50 {_pct(ms, 0.5):6.2f} ms  p99 {_pct(ms, 0.99):6.2f} ms  "
        f"max {max(ms, default=float('nan')):7.2f} ms"
    )


def _beside(loop: ClaimLoop, window: float, label: str, op: object) -> float:
    """Run `op` with the loop's windows before, during and after it; returns its wall time."""
    time.sleep(window)
    start = time.monotonic()
    op()  # type: ignore[operator]
    end = time.monotonic()
    time.sleep(window)
    print(f"{label}: {end - start:.3f} s")
    print(_window("before", loop.between(start - window, start)))
    print(_window("during", loop.between(start, end)))
    print(_window("after", loop.between(end, end + window)))
    return end - start


def _load_history(dsn: str, n: int, days: int, base: int, checkpoint: bool) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        for d in range(days):
            conn.execute("SELECT pgwork.history_partition(%s)", (FIRST_DAY + timedelta(days=d),))
        conn.execute(HISTORY, {"base": base, "n": n, "days": days, "first": FIRST_DAY.isoformat()})
        conn.execute("ANALYZE pgwork.job_history")
        if checkpoint:  # as old days are: written out long ago, nothing of them dirty in memory
            conn.execute("CHECKPOINT")


def _load_finished(dsn: str, n: int) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(FINISHED, {"n": n, "tag": f"f{uuid.uuid4().hex[:8]}-"})
        conn.execute("VACUUM ANALYZE pgwork.jobs")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dsn", required=True, help="a role that may create databases")
    parser.add_argument("--sizes", default="1000000,10000000", help="history rows per retention run")
    parser.add_argument("--days", type=int, default=10)
    parser.add_argument("--prune-rows", type=int, default=1_000_000)
    parser.add_argument("--move-rows", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--window", type=float, default=10.0)
    parser.add_argument(
        "--checkpoint", action="store_true", help="CHECKPOINT after loading the history (untimed), before the drop"
    )
    parser.add_argument("--skip-moves", action="store_true", help="only the drops: no archive, prune or rounds")
    args = parser.parse_args()
    name = f"pgwork_hist_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(args.dsn, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        version = admin.execute("SHOW server_version").fetchone()
        autovacuum = admin.execute("SHOW autovacuum").fetchone()
    dsn = with_dbname(args.dsn, name)
    try:
        migrate(dsn)
        print(f"server PostgreSQL {version and version[0]}, autovacuum {autovacuum and autovacuum[0]}")
        print(f"load average at start {os.getloadavg()}")
        loop = ClaimLoop(dsn)
        loop.start()
        with Queue(dsn) as q:
            base = 10**12
            for n in (int(s) for s in args.sizes.split(",")):
                t0 = time.monotonic()
                _load_history(dsn, n, args.days, base, args.checkpoint)
                base += n
                print(f"\nloaded {n} rows into {args.days} day partitions in {time.monotonic() - t0:.1f} s (untimed)")
                dropped: list[object] = []
                _beside(
                    loop,
                    args.window,
                    f"drop_history: {n} rows in {args.days} days",
                    lambda out=dropped: out.extend(q.drop_history(datetime.now(UTC).date())),
                )
                print(f"  {len(dropped)} partitions dropped")
            for way in () if args.skip_moves else ("archive", "prune"):
                t0 = time.monotonic()
                _load_finished(dsn, args.prune_rows)
                print(f"\nloaded {args.prune_rows} finished rows into pgwork.jobs in {time.monotonic() - t0:.1f} s")
                moved: list[int] = []

                def op(way: str = way, out: list[int] = moved) -> None:
                    days = timedelta(days=1)
                    out.append(q.archive(days) if way == "archive" else q.prune(days, statuses=["succeeded"]))

                wall = _beside(loop, args.window, f"{way}: {args.prune_rows} rows (batches of 10000)", op)
                print(f"  {moved} rows; 10,000,000 at this rate: ~{wall * 10_000_000 / args.prune_rows:.0f} s")
                if way == "archive":
                    q.drop_history(datetime.now(UTC).date())
            loop.stop.set()
            loop.join()

            costs: dict[str, list[float]] = {"archive": [], "prune": []}
            for r in range(0 if args.skip_moves else args.rounds):
                for way in ("archive", "prune") if r % 2 == 0 else ("prune", "archive"):
                    _load_finished(dsn, args.move_rows)
                    t0 = time.perf_counter()
                    if way == "archive":
                        done = q.archive(timedelta(days=1))
                    else:
                        done = q.prune(timedelta(days=1), statuses=["succeeded"])
                    costs[way].append((time.perf_counter() - t0) / max(done, 1) * 1e6)
                    if way == "archive":
                        q.drop_history(datetime.now(UTC).date())
            print(f"\nper job, {args.move_rows} finished jobs a round, {args.rounds} interleaved rounds:")
            for way, values in costs.items() if not args.skip_moves else ():
                print(f"  {way:<8} {statistics.median(values):6.1f} us [{min(values):.1f}-{max(values):.1f}]")
        print(f"load average at end {os.getloadavg()}")
    finally:
        with psycopg.connect(args.dsn, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


if __name__ == "__main__":
    main()
