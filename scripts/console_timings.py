"""Page timings of the operator's console (`pgwork ui`) over a large history, on a scratch database.

Fills a fresh database with --jobs jobs made by the server itself (scripts/console_timings.sql:
97% succeeded over 12 hours, 1% dead, 1% pending, some cancelled, 200 running), VACUUM ANALYZEs it,
then requests every page in-process (Starlette's TestClient, so the figure is the server's time
plus no network) --rounds times, rotating the order, and prints the median and p90 per page in
milliseconds. Run it at growing sizes to see what grows: a bounded page does not.

    python scripts/console_timings.py --dsn postgresql://postgres@127.0.0.1:5432/postgres --jobs 2000000
"""

from __future__ import annotations

import argparse
import statistics
import time
import uuid
from pathlib import Path

import psycopg
from psycopg import sql
from starlette.testclient import TestClient

from pgwork import sql_files
from pgwork.db import migrate
from pgwork.dsn import with_dbname
from pgwork.ui.app import Settings, create_app
from pgwork.ui.data import Console
from pgwork.ui.security import AuthConfig

STATEMENTS = sql_files.parse_queries(Path(__file__).with_name("console_timings.sql").read_text(encoding="utf-8"))
BATCH = 500_000


def fill(dsn: str, jobs: int) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        for first in range(1, jobs + 1, BATCH):
            started = time.monotonic()
            conn.execute(STATEMENTS["fill"], {"first": first, "last": min(first + BATCH - 1, jobs), "total": jobs})
            print(f"  filled {min(first + BATCH - 1, jobs):>10,} jobs ({time.monotonic() - started:.1f}s)", flush=True)
        conn.execute(STATEMENTS["running"], {"count": 200})
        conn.execute("VACUUM ANALYZE pgwork.jobs")


def pages(dead_id: int) -> dict[str, str]:
    return {
        "overview": "/",
        "live overview": "/live/overview",
        "jobs (newest)": "/jobs",
        "jobs state=dead": "/jobs?state=dead",
        "jobs error~rare": "/jobs?error=quota+exceeded",
        "jobs payload tenant=7": "/jobs?type=type-7&path=tenant&value=7",
        "jobs page 50k back": f"/jobs?before={dead_id}",
        "job detail": f"/jobs/{dead_id}",
        "running": "/running",
        "dead letters": "/dead",
        "actions": "/actions",
        "confirm bulk retry (dead)": "/confirm?action=retry&state=dead",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dsn", default="postgresql://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--jobs", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--keep", action="store_true", help="keep the scratch database")
    parser.add_argument("--reuse", metavar="DATABASE", help="time the pages again on a database kept by --keep")
    args = parser.parse_args()
    name = args.reuse or f"pgwork_console_lab_{uuid.uuid4().hex[:8]}"
    if not args.reuse:
        with psycopg.connect(args.dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    dsn = with_dbname(args.dsn, name)
    try:
        migrate(dsn)
        if not args.reuse:
            started = time.monotonic()
            fill(dsn, args.jobs)
            print(f"{args.jobs:,} jobs ready in {time.monotonic() - started:.0f}s", flush=True)
        with psycopg.connect(dsn) as conn:
            count = conn.execute("SELECT max(id) FROM pgwork.jobs").fetchone()
        args.jobs = int(count[0]) if count and count[0] else args.jobs
        with psycopg.connect(dsn) as conn:
            size = conn.execute("SELECT pg_size_pretty(pg_total_relation_size('pgwork.jobs'))").fetchone()
            version = conn.execute("SHOW server_version").fetchone()
        console = Console(dsn)
        timings: dict[str, list[float]] = {}
        with TestClient(create_app(console, Settings(auth=AuthConfig(), listen=False, live="poll"))) as client:
            urls = pages(max(args.jobs - 50_000, 1000))
            names = list(urls)
            for r in range(args.rounds + 1):
                for i in range(len(names)):
                    label = names[(i + r) % len(names)]
                    t0 = time.perf_counter()
                    response = client.get(urls[label])
                    elapsed = (time.perf_counter() - t0) * 1000
                    assert response.status_code == 200, (label, response.status_code)
                    if r:  # the first round warms caches and prepared statements
                        timings.setdefault(label, []).append(elapsed)
        console.close()
        print(
            f"\n{args.jobs:,} jobs ({size[0] if size else '?'}), PostgreSQL {version[0] if version else '?'}, "
            f"{args.rounds} rounds; ms per page"
        )
        print(f"{'page':<28}{'median':>9}{'p90':>9}")
        for label in names:
            values = sorted(timings[label])
            p90 = values[int(0.9 * (len(values) - 1))]
            print(f"{label:<28}{statistics.median(values):>9.1f}{p90:>9.1f}")
    finally:
        if not args.keep and not args.reuse:
            with psycopg.connect(args.dsn, autocommit=True) as conn:
                conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


if __name__ == "__main__":
    main()
