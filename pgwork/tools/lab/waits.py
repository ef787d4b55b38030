"""Experiment 7: waiting for a result, and what the completion NOTIFY costs the finishing side.

Latency: one job at a time is claimed and finished by hand while a producer waits for it; the
figure runs from the finishing `succeed` returning (its commit) to the wait returning. pgwork's
`Queue.wait` (LISTEN, with a 30 s poll so only the notification can end it early) side by side
with what a producer without it does: read the row every 100 ms.

Cost: claimers drain trivial jobs (as experiment 5) with the `pgwork_finished` trigger enabled
and disabled, rounds alternating in the same run; jobs/s per round, the median reported.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from pgwork.tools.lab.claimers import ClaimerFleet, ClaimerSpec
from pgwork.tools.lab.labdb import JOB_TYPE, LabDatabase
from pgwork.tools.lab.results import Measurement, Outcome
from pgwork.tools.lab.stats import duplicates, percentile

NAME = "waits"
POLL_BASELINE = 0.1


@dataclass(frozen=True)
class Plan:
    waits: int
    rounds: int
    jobs: int
    claimers: int
    drain_cases: tuple[tuple[int, str], ...]  # (batch, finish)


def plan(quick: bool) -> Plan:
    if quick:
        return Plan(waits=10, rounds=1, jobs=1000, claimers=2, drain_cases=((1, "each"),))
    return Plan(waits=50, rounds=3, jobs=10_000, claimers=8, drain_cases=((1, "each"), (100, "many")))


def _latencies(lab: LabDatabase, n: int, wait: Callable[[int], object]) -> list[float]:
    """ms from the finishing commit to `wait(job_id)` returning, one job at a time."""
    return [ms for ms in (_one_latency(lab, i, wait) for i in range(n)) if ms is not None]


def _one_latency(lab: LabDatabase, i: int, wait: Callable[[int], object]) -> float | None:
    queue = lab.queue
    lab.reset()
    job_id = queue.enqueue(JOB_TYPE, {"wait": i})
    [claimed] = queue.claim("lab-waits", job_types=[JOB_TYPE])
    returned: list[float] = []

    def waiter() -> None:
        wait(job_id)
        returned.append(time.perf_counter())

    thread = threading.Thread(target=waiter, daemon=True)
    thread.start()
    # The waiter LISTENs and reads once before blocking; give it that long (a LISTEN that came
    # late would only make pgwork's figure worse, never better).
    time.sleep(0.05)
    queue.succeed(claimed.lease, {"ok": i})
    committed = time.perf_counter()
    thread.join(40)
    return (returned[0] - committed) * 1000 if returned else None


def _poll_rows(lab: LabDatabase, job_id: int) -> None:
    while lab.one("lab_job_status", {"id": job_id})["status"] != "succeeded":
        time.sleep(POLL_BASELINE)


def run(lab: LabDatabase, p: Plan, say: Callable[[str], None]) -> Outcome:
    out: list[Measurement] = []
    violations: list[str] = []
    waiters = {
        "Queue.wait (LISTEN, poll 30s)": lambda job: lab.queue.wait(job, timeout=35, poll=30),
        f"reading the row every {POLL_BASELINE * 1000:g} ms": lambda job: _poll_rows(lab, job),
    }
    for series, wait in waiters.items():
        ms = _latencies(lab, p.waits, wait)
        x = f"{p.waits} jobs"
        for metric, value in (("wait p50", percentile(ms, 50)), ("wait p95", percentile(ms, 95))):
            out.append(Measurement(NAME, series, x, metric, value, "ms"))
        out.append(Measurement(NAME, series, x, "waits returned", len(ms)))
        if len(ms) != p.waits:
            violations.append(f"waits {series}: {p.waits - len(ms)} waits did not return")
        say(f"  {series:<34} p50 {percentile(ms, 50):7.2f} ms, p95 {percentile(ms, 95):7.2f} ms")

    for batch, finish in p.drain_cases:
        rates: dict[str, list[float]] = {"NOTIFY on": [], "NOTIFY off": []}
        for _ in range(p.rounds):
            for state in ("NOTIFY off", "NOTIFY on"):
                lab.run("finished_notify_on" if state == "NOTIFY on" else "finished_notify_off")
                try:
                    rates[state].append(_drain_rate(lab, p, batch, finish, violations))
                finally:
                    lab.run("finished_notify_on")
        series = f"drain, batch {batch}, finish {finish}, {p.claimers} claimers"
        for state, values in rates.items():
            out.append(Measurement(NAME + "-cost", series, state, "jobs/s", statistics.median(values), "jobs/s"))
            out.append(Measurement(NAME + "-cost", series, state, "rounds", ", ".join(f"{v:.0f}" for v in values)))
        say(
            f"  {series}: NOTIFY on {statistics.median(rates['NOTIFY on']):.0f} jobs/s, "
            f"off {statistics.median(rates['NOTIFY off']):.0f} jobs/s"
        )
    return Outcome(out, violations, p.waits * 2 + p.rounds * 2 * len(p.drain_cases))


def _drain_rate(lab: LabDatabase, p: Plan, batch: int, finish: str, violations: list[str]) -> float:
    lab.fresh_queue(p.jobs)
    limit = p.jobs / 50 / p.claimers + 120
    specs = [
        ClaimerSpec(lab.dsn, f"waits-{i + 1}", "skiplocked", 0.0, limit, batch=batch, finish=finish)
        for i in range(p.claimers)
    ]
    reports = ClaimerFleet(specs).wait()
    s = lab.summary()
    executed = [j for r in reports for j in r.executed]
    if duplicates(executed) or s.succeeded != p.jobs or s.results != p.jobs:
        violations.append(f"waits drain batch {batch}: {s.succeeded}/{p.jobs} succeeded, {duplicates(executed)} dup")
    return p.jobs / s.seconds if s.seconds > 0 else float("nan")
