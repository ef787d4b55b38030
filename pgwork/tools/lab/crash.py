"""Experiment 4: the crash timeline, measured with real `pgwork worker` processes.

Two workers, three long jobs, a short lease renewed by heartbeats. Once both workers hold a job,
the owner of job 1 gets SIGKILL. The rows are read at each step: held, killed, lease overdue
(found by the orphan predicate), reclaimed by the reaper, and finished, with job 1 on attempt 2
and one result per job.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pgwork.models import NewJob
from pgwork.tools.fleet import WorkerFleet
from pgwork.tools.lab import CRASH_JOB_TYPE as JOB_TYPE
from pgwork.tools.lab.labdb import LabDatabase
from pgwork.tools.lab.results import Measurement, Outcome

NAME = "crash"
WORKERS = ("w1", "w2")
EVENTS = "crash-events"
# crash_rows column -> (metric, unit)
COLUMNS = {
    "status": ("status", ""),
    "owner": ("owner", ""),
    "attempt": ("attempt_count", ""),
    "lease_left_s": ("lease left", "s"),
    "heartbeat_age_s": ("heartbeat age", "s"),
    "results": ("result rows", ""),
}


@dataclass(frozen=True)
class Plan:
    job_seconds: float
    lease: float
    heartbeat: float
    observe_after: float  # seconds after both workers hold a job
    overdue: float  # how far past its lease job 1 is when the orphan predicate is read


def plan(quick: bool) -> Plan:
    if quick:
        return Plan(job_seconds=5.0, lease=3.0, heartbeat=1.0, observe_after=1.5, overdue=1.0)
    return Plan(job_seconds=24.0, lease=10.0, heartbeat=3.0, observe_after=6.0, overdue=5.0)


def _wait_for(check: Callable[[], bool], timeout: float, what: str) -> None:
    end = time.monotonic() + timeout
    while not check():
        if time.monotonic() > end:
            raise TimeoutError(f"crash timeline: gave up waiting for {what} after {timeout:.0f}s")
        time.sleep(0.1)


def run(lab: LabDatabase, p: Plan, say: Callable[[str], None]) -> Outcome:
    out: list[Measurement] = []
    violations: list[str] = []
    lab.reset()
    lab.queue.enqueue_many([NewJob(JOB_TYPE, {"seconds": p.job_seconds, "n": n}) for n in (1, 2, 3)])
    rows: Callable[[], list[dict[str, Any]]] = lambda: lab.run("crash_rows")  # noqa: E731

    def snapshot(step: str) -> list[dict[str, Any]]:
        current = rows()
        say(f"  {step}")
        for r in current:
            say("    " + ", ".join(f"{c}={r[c]}" for c in ("id", *COLUMNS)))
            for c, (metric, unit) in COLUMNS.items():
                value = r[c]
                out.append(Measurement(NAME, step, str(r["id"]), metric, "" if value is None else value, unit))
        return current

    logs = Path(tempfile.mkdtemp(prefix="pgwork-lab-crash-"))
    fleet = WorkerFleet(
        lab.dsn,
        "pgwork.tools.lab.crash_app",
        logs,
        ("--concurrency", "1", "--lease", f"{p.lease:g}s", "--heartbeat", f"{p.heartbeat:g}s", "--poll", "0.5s",
         "--grace", "1s"),
    )  # fmt: skip
    for name in WORKERS:
        fleet.start(name)
    try:
        _wait_for(lambda: sum(r["status"] == "running" for r in rows()) == 2, 60, "both workers to hold a job")
        held_at = time.monotonic()
        time.sleep(p.observe_after)
        first = snapshot(f"1 held (t={time.monotonic() - held_at:.0f}s)")
        victim = str(next(r["owner"] for r in first if r["id"] == 1))
        fleet.kill(victim, timeout=10)
        killed_at = time.monotonic()
        time.sleep(1.0)
        snapshot(f"2 SIGKILL {victim} (t={time.monotonic() - held_at:.0f}s)")
        _wait_for(
            lambda: any(o["id"] == 1 and o["overdue_s"] >= p.overdue for o in lab.run("orphans")),
            p.lease + p.overdue + 30,
            "job 1's lease to lapse",
        )
        orphans = lab.run("orphans")
        snapshot(f"3 lease overdue (t={time.monotonic() - held_at:.0f}s)")
        out.append(
            Measurement(
                EVENTS,
                "3 lease overdue",
                "orphan predicate",
                "returned",
                "; ".join(f"{o['id']}, {o['owner']}, {o['overdue_s']}s overdue" for o in orphans),
            )
        )
        reclaimed = lab.queue.reap()
        snapshot(f"4 reaped (t={time.monotonic() - held_at:.0f}s)")
        out.append(
            Measurement(
                EVENTS,
                "4 reaped",
                "reaper",
                "reclaimed",
                "; ".join(
                    f"{r.id} from {r.previous_owner}, attempt {r.attempt_count} -> {r.status}" for r in reclaimed
                ),
            )
        )
        _wait_for(
            lambda: all(r["status"] == "succeeded" for r in rows()),
            3 * p.job_seconds + 60,
            "all three jobs to succeed",
        )
        final = snapshot(f"5 finished (t={time.monotonic() - held_at:.0f}s)")
        say(f"  kill to finish: {time.monotonic() - killed_at:.0f}s")
    except Exception:
        say(f"  crash timeline failed; worker logs kept in {logs}")
        raise
    else:
        shutil.rmtree(logs, ignore_errors=True)
    finally:
        fleet.stop_all()
    by_id = {int(r["id"]): r for r in final}
    expected = {1: 2, 2: 1, 3: 1}
    if [o["id"] for o in orphans] != [1]:
        violations.append(f"crash: the orphan predicate found {[o['id'] for o in orphans]}, expected [1]")
    for job_id, attempt in expected.items():
        r = by_id.get(job_id)
        if r is None or r["status"] != "succeeded" or r["attempt"] != attempt or r["results"] != 1:
            violations.append(f"crash: job {job_id} ended as {r}, expected succeeded at attempt {attempt}, 1 result")
    return Outcome(out, violations, 1)
