"""Experiment 2: what a transaction held across the work costs, seen from pg_stat_activity.

Both designs run the same jobs while the parent samples the workers' connections: how many sit
`idle in transaction`, the longest open transaction, and the age (in transaction ids) of the
oldest xmin/xid they pin. A steady trickle of unrelated writes (pgwork_lab.churn) stands in for
the rest of the application, so a pinned horizon shows up as an age that grows with job length.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from pgwork.tools.lab.claimers import ClaimerFleet, ClaimerSpec
from pgwork.tools.lab.labdb import LabDatabase
from pgwork.tools.lab.results import Measurement, Outcome
from pgwork.tools.lab.stats import duplicates, percentile

NAME = "held"
DESIGNS = ("held", "skiplocked")


@dataclass(frozen=True)
class Plan:
    workers: int
    job_seconds: tuple[float, ...]
    rounds: int  # jobs per worker
    sample_every: float
    churn_every: float


def plan(quick: bool) -> Plan:
    if quick:
        return Plan(4, (0.1, 0.5), 3, 0.05, 0.02)
    return Plan(8, (0.2, 3.0), 5, 0.05, 0.02)


@dataclass
class Samples:
    idle_in_tx: list[int]
    longest_tx_s: list[float]
    xmin_age: list[int]
    xid_age: list[int]


def run(lab: LabDatabase, p: Plan, say: Callable[[str], None]) -> Outcome:
    out: list[Measurement] = []
    violations: list[str] = []
    facts = 0
    for job_seconds in p.job_seconds:
        for design in DESIGNS:
            jobs = p.workers * p.rounds
            lab.fresh_queue(jobs)
            limit = jobs * job_seconds * 3 / p.workers + 60
            specs = [ClaimerSpec(lab.dsn, f"{design}-{i + 1}", design, job_seconds, limit) for i in range(p.workers)]
            fleet = ClaimerFleet(specs)
            samples = Samples([], [], [], [])
            next_sample = 0.0
            end = time.monotonic() + limit + 60
            while not fleet.done() and time.monotonic() < end:
                lab.run("churn")
                now = time.monotonic()
                if now >= next_sample:
                    r = lab.one("activity_sample")
                    samples.idle_in_tx.append(int(r["idle_in_tx"]))
                    samples.longest_tx_s.append(float(r["longest_tx_s"]))
                    samples.xmin_age.append(int(r["xmin_age"]))
                    samples.xid_age.append(int(r["xid_age"]))
                    next_sample = now + p.sample_every
                time.sleep(p.churn_every)
            reports = fleet.wait()
            s = lab.summary()
            executed = [j for r in reports for j in r.executed]
            series = design
            x = f"{job_seconds:g}"

            def m(metric: str, value: float | int, unit: str = "", series: str = series, x: str = x) -> None:
                out.append(Measurement(NAME, series, x, metric, value, unit))

            m("workers", p.workers)
            m("jobs", jobs)
            m("samples", len(samples.idle_in_tx))
            m("idle in transaction (max)", max(samples.idle_in_tx, default=0))
            m("idle in transaction (mean)", sum(samples.idle_in_tx) / max(1, len(samples.idle_in_tx)))
            m("longest open transaction", max(samples.longest_tx_s, default=0.0), "s")
            m("backend_xmin age (max)", max(samples.xmin_age, default=0), "xids")
            m("backend_xid age (max)", max(samples.xid_age, default=0), "xids")
            m("jobs/s", jobs / s.seconds if s.seconds > 0 else float("nan"), "jobs/s")
            claim_ms = [ms for r in reports for ms in r.claim_ms]
            m("claim p50", percentile(claim_ms, 50), "ms")
            say(
                f"  {design:<10} {job_seconds:g}s jobs: idle in tx max {max(samples.idle_in_tx, default=0)}, "
                f"longest tx {max(samples.longest_tx_s, default=0.0):.2f}s, "
                f"xmin age {max(samples.xmin_age, default=0)}, xid age {max(samples.xid_age, default=0)}"
            )
            if design == "skiplocked":
                facts += 1
                if duplicates(executed) or s.succeeded != jobs or s.inflated:
                    violations.append(
                        f"held/skiplocked {x}s: {duplicates(executed)} duplicates, {s.succeeded}/{jobs} succeeded"
                    )
    return Outcome(out, violations, facts)
