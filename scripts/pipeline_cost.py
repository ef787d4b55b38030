"""What a pipeline costs (migration 22), side by side in one run, rounds interleaved so load on
the machine falls on every case alike. Prints median [min-max] over the rounds; asserts nothing.

  enqueue, per job        enqueue_many of 200 jobs: plain, against each job `after` one existing
                          parent (enqueue_after: parents locked and read, edges written)
  enqueue one             enqueue(): plain against after=[a parent]
  finish a parent         succeed of a job with 200 waiting children (all released) against a
                          job with none
  fan-in of 200           succeed_many of 200 pages that one merge waits for (the last releases
                          it) against 200 pages with no child
  claim                   claim of one job from 1000 pending, with and without 10000 waiting jobs
                          in the table (the claim never sees them)

    python scripts/pipeline_cost.py [--dsn postgresql://postgres@127.0.0.1:5432/postgres] [--rounds 7]

A database `pgwork_pipeline_cost` is created on the server (and dropped at the end).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import psycopg
from psycopg import sql

from pgwork.db import Queue, migrate
from pgwork.db.batches import StoredSuccess
from pgwork.dsn import with_dbname
from pgwork.models import NewJob

FAN = 200


def _timed(run: Callable[[], object]) -> float:
    t = time.perf_counter()
    run()
    return time.perf_counter() - t


def _clear(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("TRUNCATE pgwork.jobs, pgwork.job_results, pgwork.job_edges")


def enqueue_many(q: Queue, after: bool) -> float:
    parent = q.enqueue("parent", {})
    jobs = [NewJob("child", {"n": n}, after=[parent] if after else ()) for n in range(FAN)]
    return _timed(lambda: q.enqueue_many(jobs)) / FAN


def enqueue_one(q: Queue, after: bool) -> float:
    parent = q.enqueue("parent", {})
    times = [_timed(lambda n=n: q.enqueue("child", {"n": n}, after=[parent] if after else ())) for n in range(50)]
    return statistics.median(times)


def finish_parent(q: Queue, children: bool) -> float:
    parent = q.enqueue("parent", {})
    if children:
        q.enqueue_many([NewJob("child", {"n": n}, after=[parent]) for n in range(FAN)])
    [held] = q.claim("bench", job_types=["parent"])
    return _timed(lambda: q.succeed(held.lease, {"ok": 1}))


def fan_in(q: Queue, merge: bool) -> float:
    pages = q.enqueue_many([NewJob("page", {"p": p}) for p in range(FAN)])
    if merge:
        q.enqueue("merge", {}, after=pages)
    held = q.claim("bench", job_types=["page"], limit=FAN)
    return _timed(lambda: q.finish_many([StoredSuccess(h.lease, "1") for h in held], []))


def claim(q: Queue, waiting: bool) -> float:
    q.enqueue_many([NewJob("work", {"n": n}) for n in range(1000)])
    if waiting:
        parent = q.enqueue("blocker", {}, delay=3600)
        q.enqueue_many([NewJob("work", {"w": n}, after=[parent]) for n in range(10_000)])
    for _ in range(50):  # past the first visits of the freshly written pages
        q.claim("warm", job_types=["work"])
    times = [_timed(lambda: q.claim("bench", job_types=["work"])) for _ in range(200)]
    return statistics.median(times)


CASES: dict[str, tuple[Callable[[Queue, bool], float], str, str]] = {
    "enqueue_many of 200, per job": (enqueue_many, "plain", "after 1 parent"),
    "enqueue one job": (enqueue_one, "plain", "after 1 parent"),
    "succeed a parent": (finish_parent, "no children", "200 children released"),
    "succeed_many of 200 pages": (fan_in, "no merge", "a merge waiting (fan-in)"),
    "claim 1 of 1000 pending": (claim, "no waiting jobs", "+10000 waiting"),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dsn", default="postgresql://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    name = "pgwork_pipeline_cost"
    with psycopg.connect(args.dsn, autocommit=True) as admin:
        admin.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(name)))
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    dsn = with_dbname(args.dsn, name)
    try:
        migrate(dsn)
        with psycopg.connect(dsn) as conn:
            version = conn.execute("SHOW server_version").fetchone()
        print(f"PostgreSQL {version[0] if version else '?'}; {args.rounds} rounds, cases interleaved; ms")
        figures: dict[tuple[str, bool], list[float]] = {}
        with Queue(dsn, pool_size=2) as q:
            for r in range(args.rounds):
                for case, (run, _, _) in CASES.items():
                    for flag in (r % 2 == 0, r % 2 != 0):  # which side goes first alternates
                        _clear(dsn)
                        figures.setdefault((case, flag), []).append(run(q, flag) * 1000)
        for case, (_, off, on) in CASES.items():
            for flag, label in ((False, off), (True, on)):
                xs = figures[(case, flag)]
                print(f"{case:32} {label:26} {statistics.median(xs):8.3f} [{min(xs):.3f}-{max(xs):.3f}]")
    finally:
        with psycopg.connect(args.dsn, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


if __name__ == "__main__":
    main()
