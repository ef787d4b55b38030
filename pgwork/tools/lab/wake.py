"""Experiment 6: the worker process itself, run as a Deployment runs it (`pgwork worker`).

- wake-up: an idle worker polling only every 5 minutes, so only LISTEN can wake it; one job
  enqueued at a time, latency read from the row (created_at -> started_at, the server's clock);
- trivial jobs drained by one burst worker with --batch 1 and --batch 100: the rate is the jobs
  over first claim -> last completion, read from the rows; the claims must equal the jobs;
- memory: VmRSS of the idle worker, and VmHWM (its peak) during each drain.
"""

from __future__ import annotations

import dataclasses
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pgwork.db import Queue
from pgwork.models import NewJob
from pgwork.tools.fleet import WorkerFleet
from pgwork.tools.lab import NOOP_JOB_TYPE
from pgwork.tools.lab.labdb import LabDatabase
from pgwork.tools.lab.results import Measurement, Outcome
from pgwork.tools.lab.stats import percentile

NAME = "wake"
DRAIN = "wake-drain"
APP = "pgwork.tools.lab.noop_app"


@dataclass(frozen=True)
class Plan:
    rounds: int  # jobs enqueued one at a time for the wake-up latency
    jobs: int  # jobs per drain
    drains: tuple[tuple[int, int], ...]  # (--batch, --concurrency)


def plan(quick: bool) -> Plan:
    if quick:
        return Plan(rounds=10, jobs=500, drains=((1, 1), (100, 1)))
    return Plan(rounds=40, jobs=3000, drains=((1, 1), (100, 1), (100, 4)))


def memory_kib(pid: int, field: str) -> int:
    """A VmRSS/VmHWM figure of a live process, in KiB (0 once it is gone)."""
    try:
        lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    except OSError:
        return 0
    for line in lines:
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def _finished(q: Queue, job_id: int, timeout: float) -> dict[str, Any]:
    """The job's row once it succeeded, polled every 5 ms (the latency is read from the row, not from here)."""
    end = time.monotonic() + timeout
    while (row := q.job(job_id)) is None or row.status != "succeeded":
        if time.monotonic() > end:
            raise TimeoutError(f"wake: job {job_id} not done after {timeout:.0f}s (is the worker running?)")
        time.sleep(0.005)
    return dataclasses.asdict(row)


def wake_latency(q: Queue, fleet: WorkerFleet, rounds: int) -> tuple[list[float], int]:
    worker = fleet.start("wake-idle", "--poll", "5m")
    # Listening once it has taken a first job: LISTEN starts before the first claim.
    _finished(q, q.enqueue(NOOP_JOB_TYPE, {"warm-up": True}), 60)
    rss = memory_kib(worker.pid, "VmRSS")
    latencies = []
    for n in range(rounds):
        row = _finished(q, q.enqueue(NOOP_JOB_TYPE, {"wake": n}), 10)
        latencies.append((row["started_at"] - row["created_at"]).total_seconds() * 1000)
        time.sleep(0.05)  # idle again before the next one
    fleet.stop_all()
    return latencies, rss


def drain(lab: LabDatabase, fleet: WorkerFleet, jobs: int, batch: int, concurrency: int) -> tuple[float, int, int]:
    """Jobs per second, the worker's peak RSS (KiB) and the claims it made for `jobs` trivial jobs."""
    lab.reset()
    lab.queue.enqueue_many([NewJob(NOOP_JOB_TYPE, {"n": n}) for n in range(jobs)])
    options = ("--burst", "--batch", str(batch), "--concurrency", str(concurrency))
    worker = fleet.start(f"drain-b{batch}-c{concurrency}", *options)
    peak = 0
    while worker.alive():
        peak = max(peak, memory_kib(worker.pid, "VmHWM"))
        time.sleep(0.05)
    summary = lab.summary()
    return (jobs / summary.seconds if summary.seconds > 0 else float("nan")), peak, summary.attempts


def run(lab: LabDatabase, p: Plan, say: Callable[[str], None]) -> Outcome:
    out: list[Measurement] = []
    violations: list[str] = []
    logs = Path(tempfile.mkdtemp(prefix="pgwork-lab-wake-"))
    fleet = WorkerFleet(lab.dsn, APP, logs, ("--job-types", NOOP_JOB_TYPE, "--grace", "5s"))
    try:
        lab.reset()
        latencies, rss = wake_latency(lab.queue, fleet, p.rounds)
        series, x = "idle worker, LISTEN", "poll 5m"
        out += [
            Measurement(NAME, series, x, "jobs", len(latencies)),
            Measurement(NAME, series, x, "wake p50", statistics.median(latencies), "ms"),
            Measurement(NAME, series, x, "wake p95", percentile(latencies, 95), "ms"),
            Measurement(NAME, series, x, "wake max", max(latencies), "ms"),
            Measurement(NAME, series, x, "RSS idle", rss / 1024, "MiB"),
        ]
        say(f"  wake-up via LISTEN: p50 {statistics.median(latencies):.1f} ms, max {max(latencies):.1f} ms")
        for batch, concurrency in p.drains:
            rate, peak, claims = drain(lab, fleet, p.jobs, batch, concurrency)
            series = f"--batch {batch} --concurrency {concurrency}"
            out += [
                Measurement(DRAIN, series, "1 worker", "jobs", p.jobs),
                Measurement(DRAIN, series, "1 worker", "jobs/s", rate, "jobs/s"),
                Measurement(DRAIN, series, "1 worker", "claims", claims),
                Measurement(DRAIN, series, "1 worker", "peak RSS", peak / 1024, "MiB"),
            ]
            say(f"  {series}: {rate:.0f} jobs/s, {claims} claims, peak RSS {peak / 1024:.1f} MiB")
            summary = lab.summary()
            if claims != p.jobs or summary.succeeded != p.jobs or summary.results != p.jobs or summary.inflated:
                violations.append(
                    f"wake {series}: {summary.succeeded}/{p.jobs} succeeded, {claims} claims, "
                    f"{summary.results} results, {summary.inflated} inflated"
                )
    except Exception:
        say(f"  wake-up experiment failed; worker logs kept in {logs}")
        raise
    else:
        shutil.rmtree(logs, ignore_errors=True)
    finally:
        fleet.stop_all()
    return Outcome(out, violations, len(p.drains))
