"""Figures for the worker runtime, printed, not asserted.

    PYTHONPATH=$PWD python bench/worker_figures.py [--dsn postgresql://postgres@127.0.0.1:5432/postgres]

- wake latency: an idle worker (poll 5 min, so only LISTEN can wake it); enqueue one job at a
  time and read created_at -> started_at from the row (both the server's clock);
- claims/s on trivial jobs with --batch 1 and --batch 100: one burst worker drains N jobs;
  the rate is N over first claim -> last completion, read from the rows (as the lab did);
- worker RSS: VmRSS of an idle worker, and VmHWM (peak) after a batch run.

Uses a throwaway database on the given server and drops it afterwards.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import psycopg
from psycopg import sql

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pgwork.dsn import with_dbname  # noqa: E402
from pgwork.models import NewJob  # noqa: E402
from pgwork.queue import Queue, migrate  # noqa: E402

APP = "bench_worker_app"


def write_app(directory: Path) -> None:
    (directory / f"{APP}.py").write_text(
        "import pgwork\n\n\n@pgwork.handler('noop')\ndef noop(job):\n    return {'n': job.payload.get('n')}\n"
    )


def worker(dsn: str, app_dir: Path, *args: str) -> subprocess.Popen[bytes]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(app_dir)]), DATABASE_URL=dsn)
    cmd = [sys.executable, "-m", "pgwork.cli", "worker", "--app", APP, "--metrics-port", "0", "--id", "bench", *args]
    return subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def status_kb(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def wake_latency(q: Queue, dsn: str, app_dir: Path, rounds: int) -> tuple[list[float], int]:
    proc = worker(dsn, app_dir, "--poll", "5m")
    try:
        time.sleep(2.0)  # started, listening, idle
        rss = status_kb(proc.pid, "VmRSS")
        latencies = []
        for n in range(rounds):
            job_id = q.enqueue("noop", {"wake": n})
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                row = q.job(job_id)
                if row and row["status"] == "succeeded":
                    latencies.append((row["started_at"] - row["created_at"]).total_seconds() * 1000)
                    break
                time.sleep(0.005)
            time.sleep(0.05)  # idle again before the next one
        return latencies, rss
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(20)


def claim_rate(q: Queue, dsn: str, app_dir: Path, jobs: int, batch: int, concurrency: int) -> tuple[float, int, int]:
    run = uuid.uuid4().hex[:8]
    ids = q.enqueue_many([NewJob("noop", {"run": run, "n": n}) for n in range(jobs)])
    proc = worker(dsn, app_dir, "--burst", "--batch", str(batch), "--concurrency", str(concurrency))
    peak = 0
    while proc.poll() is None:
        try:
            peak = max(peak, status_kb(proc.pid, "VmHWM"))
        except OSError:
            break
        time.sleep(0.05)
    rows = [q.job(i) for i in ids]
    done = [r for r in rows if r and r["status"] == "succeeded"]
    start = min(r["started_at"] for r in done)
    end = max(r["completed_at"] for r in done)
    claims = sum(r["attempt_count"] for r in done)
    return jobs / (end - start).total_seconds(), peak, claims


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--dsn", default=os.environ.get("PGWORK_TEST_DSN", "postgresql://postgres@127.0.0.1:5432/postgres")
    )
    parser.add_argument("--jobs", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=40)
    args = parser.parse_args()
    name = f"pgwork_bench_worker_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(args.dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {} ENCODING 'UTF8' TEMPLATE template0").format(sql.Identifier(name)))
    dsn = with_dbname(args.dsn, name)
    app_dir = Path(tempfile.mkdtemp(prefix="pgwork-bench-app-"))
    write_app(app_dir)
    try:
        migrate(dsn)
        with Queue(dsn, pool_size=2) as q:
            latencies, idle_rss = wake_latency(q, dsn, app_dir, args.rounds)
            print(
                f"wake latency (LISTEN, idle worker, {len(latencies)} jobs): "
                f"p50 {statistics.median(latencies):.1f} ms, "
                f"p95 {statistics.quantiles(latencies, n=20)[-1]:.1f} ms, max {max(latencies):.1f} ms"
            )
            print(f"worker RSS idle: {idle_rss / 1024:.1f} MiB")
            for batch, concurrency in ((1, 1), (100, 1), (100, 4)):
                rate, peak, claims = claim_rate(q, dsn, app_dir, args.jobs, batch, concurrency)
                print(
                    f"trivial jobs, one worker, --batch {batch} --concurrency {concurrency}: "
                    f"{rate:.0f} claims/s ({claims} claims for {args.jobs} jobs), peak RSS {peak / 1024:.1f} MiB"
                )
    finally:
        with psycopg.connect(args.dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
        shutil.rmtree(app_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
