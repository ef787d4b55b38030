"""Claim cost with a per-type limit in place against without, at 16 concurrent claimers, side by
side in one run: each round runs every case for the same seconds, the cases' order rotating round
by round so load on the machine falls on all alike. Each claimer is a process with its own
connection, claiming one job at a time and succeeding it at once. Prints claims/s and p50/p99
claim latency per case; asserts nothing.

Cases (all on type `gpu`, 16 claimers):
  no limit            the version-7 claim statement (the fast path)
  limit, not binding  max_running 1000: the type's row locked and its running jobs counted per claim
  rate, not binding   a token bucket of 1000000/s on the row, spent per claim
  limit 4, binding    max_running 4: at most 4 of the 16 hold a job; the rest get nothing back
Then, on one connection, the unlimited claim against version 7's function (installed beside it as
pgwork.claim_v7, from its migration), call by call alternating: what the limits probe costs a type
with no limit.

    python scripts/limits_bench.py [--dsn postgresql://postgres@127.0.0.1:5432/postgres] [--seconds 5] [--rounds 3]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import re
import statistics
import time
import uuid
from collections.abc import Callable
from typing import Any

import psycopg
from psycopg import sql

from pgwork import sql_files
from pgwork.db import Queue, migrate
from pgwork.dsn import with_dbname
from pgwork.limits import Rate
from pgwork.models import NewJob

CLAIMERS = 16
CASES: dict[str, Callable[[Queue], Any]] = {
    "no limit": lambda q: q.clear_limit("gpu"),
    "limit, not binding": lambda q: q.set_limit("gpu", max_running=1000),
    "rate, not binding": lambda q: q.set_limit("gpu", rate=Rate(1_000_000, 1)),
    "limit 4, binding": lambda q: q.set_limit("gpu", max_running=4),
}


def claimer(dsn: str, seconds: float, start: Any, out: Any) -> None:
    owner = f"bench-{uuid.uuid4().hex[:8]}"
    latencies: list[float] = []
    claimed = 0
    with Queue(dsn, pool_size=1, check=False) as q:
        q.claim(owner, job_types=["warm-up"])  # connect before the clock starts
        start.wait()
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            t = time.perf_counter()
            jobs = q.claim(owner, job_types=["gpu"])
            latencies.append(time.perf_counter() - t)
            if jobs:
                claimed += 1
                q.succeed(jobs[0].lease, None)
    out.put((claimed, latencies))


def run_case(dsn: str, seconds: float) -> tuple[float, float, float, int]:
    ctx = mp.get_context("fork")
    start = ctx.Barrier(CLAIMERS + 1)
    out = ctx.Queue()
    procs = [ctx.Process(target=claimer, args=(dsn, seconds, start, out)) for _ in range(CLAIMERS)]
    for p in procs:
        p.start()
    start.wait()
    results = [out.get(timeout=seconds + 60) for _ in procs]
    for p in procs:
        p.join()
    claimed = sum(r[0] for r in results)
    latencies = sorted(x for r in results for x in r[1])
    p50 = statistics.median(latencies) * 1000
    p99 = latencies[int(len(latencies) * 0.99) - 1] * 1000
    return claimed / seconds, p50, p99, len(latencies)


def probe_cost(dsn: str, calls: int) -> tuple[float, float]:
    """p50 microseconds of one claim + its succeed: version 7's claim function, then today's."""
    [v7] = [m for m in sql_files.migrations() if m.version == 7]
    body = re.search(r"CREATE OR REPLACE FUNCTION pgwork\.claim\(.*?\n\$\$;\n", v7.sql, re.DOTALL)
    assert body is not None
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(body.group(0).replace("pgwork.claim(", "pgwork.claim_v7(", 1))  # type: ignore[arg-type]
        times: dict[str, list[float]] = {"claim_v7": [], "claim": []}
        for i in range(calls):
            for name in ("claim_v7", "claim") if i % 2 else ("claim", "claim_v7"):
                t = time.perf_counter()
                row = conn.execute(
                    sql.SQL("SELECT id, lease_token FROM pgwork.{}('p', ARRAY['gpu'], 1, 30)").format(
                        sql.Identifier(name)
                    )
                ).fetchone()
                assert row is not None
                conn.execute("SELECT pgwork.succeed(%s, %s, 'null'::jsonb)", row)
                times[name].append(time.perf_counter() - t)
    return statistics.median(times["claim_v7"]) * 1e6, statistics.median(times["claim"]) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dsn", default="postgresql://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=200_000)
    parser.add_argument("--probe-calls", type=int, default=3000)
    args = parser.parse_args()
    name = f"pgwork_limits_bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(args.dsn, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {} TEMPLATE template0 ENCODING 'UTF8'").format(sql.Identifier(name)))
    dsn = with_dbname(args.dsn, name)
    try:
        migrate(dsn)
        with Queue(dsn) as q:
            q.load_jobs(NewJob("gpu", {"n": i}) for i in range(args.jobs))
            with psycopg.connect(dsn, autocommit=True) as conn:
                conn.execute("VACUUM ANALYZE pgwork.jobs")
            figures: dict[str, list[tuple[float, float, float, int]]] = {case: [] for case in CASES}
            names = list(CASES)
            for r in range(args.rounds):
                for case in names[r % len(names) :] + names[: r % len(names)]:
                    CASES[case](q)
                    figures[case].append(run_case(dsn, args.seconds))
            q.clear_limit("gpu")
        print(f"\n{CLAIMERS} claimers, {args.rounds} rounds of {args.seconds:g}s per case (medians over rounds)")
        print(f"{'case':<20} {'claims/s':>9} {'calls/s':>9} {'p50 ms':>8} {'p99 ms':>8}")
        for case, rows in figures.items():
            rate = statistics.median(r[0] for r in rows)
            calls = statistics.median(r[3] for r in rows) / args.seconds
            p50 = statistics.median(r[1] for r in rows)
            p99 = statistics.median(r[2] for r in rows)
            print(f"{case:<20} {rate:>9.0f} {calls:>9.0f} {p50:>8.2f} {p99:>8.2f}")
        before, now = probe_cost(dsn, args.probe_calls)
        print(f"\none connection, claim + succeed, no limit: version 7 {before:.0f} us, now {now:.0f} us")
    finally:
        with psycopg.connect(args.dsn, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))


if __name__ == "__main__":
    main()
