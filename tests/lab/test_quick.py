"""`pgwork bench --quick` end to end: a subprocess against the test server, outputs in a tmp dir."""

from __future__ import annotations

import csv
import os
import re
import subprocess
import sys
import uuid
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_quick_bench_checks_pgworks_facts_and_writes_csv_markdown_and_plots(admin_dsn: str, tmp_path: Path) -> None:
    database = f"pgwork_lab_t_{uuid.uuid4().hex[:10]}"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    # Run from a user's project with no --out: its own docs/benchmarks.md must not be touched.
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "benchmarks.md").write_text("the user's own page\n")
    try:
        done = subprocess.run(
            [sys.executable, "-m", "pgwork.cli", "bench", "--quick", "--dsn", admin_dsn, "--database", database],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240, check=False,
        )  # fmt: skip
    finally:
        with psycopg.connect(admin_dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(database)))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "correctness: 0 duplicate claims" in done.stdout
    assert (tmp_path / "docs" / "benchmarks.md").read_text() == "the user's own page\n"
    assert not (tmp_path / "results").exists()
    [out] = tmp_path.glob("pgwork-bench-*")
    [said] = [line for line in done.stdout.splitlines() if line.startswith("writing results under ")]
    assert Path(said.removeprefix("writing results under ")).name == out.name

    with (out / "results" / "benchmark.csv").open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert {r["mode"] for r in rows} == {"quick"}
    assert {r["experiment"] for r in rows} >= {
        "machine",
        "claims",
        "held",
        "history",
        "crash",
        "drain",
        "wake",
        "wake-drain",
        "heartbeat",
        "bulk",
        "prune",
        "noisy-neighbour",
        "backlog-reading",
        "fleet-linear",
    }

    def figure(experiment: str, series: str, x: str, metric: str) -> str:
        [value] = [
            r["value"]
            for r in rows
            if (r["experiment"], r["series"], r["x"], r["metric"]) == (experiment, series, x, metric)
        ]
        return value

    for workers in ("2", "4"):
        jobs = figure("claims", "skiplocked", workers, "jobs")
        assert figure("claims", "skiplocked", workers, "executions") == jobs
        assert figure("claims", "skiplocked", workers, "duplicate executions") == "0"
        assert figure("claims", "skiplocked", workers, "inflated attempt_counts") == "0"
        assert figure("claims", "skiplocked", workers, "succeeded") == jobs
    # The held design pins connections in a transaction; pgwork's never idles inside one.
    assert int(figure("held", "held", "0.5", "idle in transaction (max)")) >= 1
    assert figure("held", "skiplocked", "0.5", "idle in transaction (max)") == "0"
    # The ready ring's type index serves the claim whatever the history (schema 23): the segment that
    # holds the pending jobs is read through it. Segments that are empty on disk after the lab's
    # VACUUM may be planned as (free) sequential scans. Without the index, a scan of everything.
    scan = figure("history", "partial index", "20000", "claim scan")
    assert re.search(r"Index Scan using ready_\d_job_type_priority_available_at_job_id_idx", scan), scan
    assert "pgwork.jobs" not in scan and "Seq Scan on jobs" not in scan, scan
    unindexed = figure("history", "no claim index", "20000", "claim scan")
    assert "Seq Scan" in unindexed and "job_type_priority_available_at_job_id_idx" not in unindexed, unindexed
    # The crash timeline: job 1 reclaimed and finished on its second attempt, one result each.
    assert figure("crash-events", "3 lease overdue", "orphan predicate", "returned").startswith("1, ")
    finished = next(r["series"] for r in rows if r["experiment"] == "crash" and r["series"].startswith("5 "))
    assert [figure("crash", finished, j, "status") for j in "123"] == ["succeeded"] * 3
    assert [figure("crash", finished, j, "attempt_count") for j in "123"] == ["2", "1", "1"]
    assert [figure("crash", finished, j, "result rows") for j in "123"] == ["1"] * 3

    # Real `pgwork worker` processes woken by LISTEN, then draining in bursts: one claim per job.
    assert float(figure("wake", "idle worker, LISTEN", "poll 5m", "wake max")) < 5000  # not the 5-minute poll
    for series in ("--batch 1 --concurrency 1", "--batch 100 --concurrency 1"):
        assert figure("wake-drain", series, "1 worker", "claims") == figure("wake-drain", series, "1 worker", "jobs")

    # Heartbeats: every design renewed every lease (a lost one is a correctness failure, exit 1), and
    # schema 4's renewals write less WAL than schema 3's lease index made them write.
    steady = {
        d: int(figure("heartbeat", d, "50 running", "WAL per round")) for d in ("lease index, ff 85", "HOT, ff 85")
    }
    assert steady["HOT, ff 85"] < steady["lease index, ff 85"], steady
    # The worker lease (migration 15) renews one row per worker: not one job row written while every job
    # is covered (a count of row versions, which other clients of a shared server cannot blur as they blur WAL).
    assert float(figure("heartbeat", "worker lease", "50 running", "job rows written per round")) == 0
    assert figure("heartbeat", "lease index, ff 85", "50 running", "HOT renewals") in ("0", "0.0")
    # Bulk enqueue: every path loaded every job pending and unclaimed (the run's exit code says so); each
    # path has its rate beside the raw COPY's. Prune: every old row deleted, both ways.
    for way in ("raw COPY", "load_jobs", "enqueue_many"):
        assert float(figure("bulk", way, "3000", "jobs/s (median)")) > 0
    for way in ("prune_batch", "0002 prune"):
        assert figure("prune", f"during {way}", "20000", "rows deleted") == "20000"
    assert float(figure("prune", "after REINDEX CONCURRENTLY", "20000", "reindex")) > 0

    # A claim for B never reads A's backlog; the claim before schema 7 (the control) reads all of it.
    assert "job_type_priority_available_at_job_id_idx" in figure(
        "noisy-neighbour", "pgwork claim for B", "20000", "claim scan"
    )
    assert figure("noisy-neighbour", "pgwork claim for B", "20000", "rows removed by filter") == "0"
    assert figure("noisy-neighbour", "claim before schema 7 (control)", "20000", "rows removed by filter") == "20000"
    # The backlog experiment checked its capped counts against the exact ones (a violation fails the run).
    assert figure("backlog-reading", "operator poll (capped at 201)", "20000", "buffers")

    # The idle fleet took the burst: every one of its claims counted, at least one per job, and the
    # workers' own histograms were read (a share, not a missing figure).
    fleet = ("fleet-linear", "pgwork worker --concurrency 1", "4 workers")
    assert float(figure(*fleet, "claims")) >= float(figure(*fleet, "jobs")) == 40
    assert 0 <= float(figure(*fleet, "claims <= 1 ms")) <= 100
    from_insert = float(figure(*fleet, "% of linear (from insert)"))
    assert 0 < from_insert <= float(figure(*fleet, "% of linear (from first claim)"))
    doc = (out / "docs" / "benchmarks.md").read_text()
    assert "Generated by `pgwork bench` from results/benchmark.csv" in doc
    for heading in (
        "## 1. Claim strategies",
        "## 3. History",
        "## 4. Crash timeline",
        "## 5. Throughput",
        "## 6. The worker process",
        "## 7. Heartbeat cost",
        "## 9. Bulk enqueue",
        "## 10. Retention under load",
        "## 11. Noisy neighbour",
        "## 12. The operator's backlog reading",
        "## 14. A burst of long jobs on a fleet of idle workers",
    ):
        assert heading in doc
    assert "| skiplocked | 4 | 40 | 40 | 0 | 0 |" in doc
    plots = sorted(p.name for p in (out / "docs" / "img").glob("*.png"))
    assert "bench-claims-throughput.png" in plots and "bench-drain.png" in plots
    assert "bench-noisy-neighbour.png" in plots and "bench-backlog-reading.png" in plots
    assert all((out / "docs" / "img" / p).stat().st_size > 1000 for p in plots)
