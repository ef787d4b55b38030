"""Experiment: the worker drain (a burst `pgwork worker` draining no-op jobs, batch 1/10/100 as the
worker-drain experiment's cases) and pgqueuer beside it, with a round-trip time of 0, 1 and 5 ms
added between the clients and PostgreSQL by a delaying TCP proxy (pgwork.tools.lab.delay). Jobs/s
from the rows (first claim to last finish) for pgwork, from its log table's stamps for pgqueuer (through asyncpg);
and each rate as a share of the same client's at 0 ms. The one-round-trip finish+claim and batching
exist for this: a claim of 100 costs one round trip, not 100."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pgwork.tools.fleet import WorkerFleet
from pgwork.tools.lab import NOOP_JOB_TYPE
from pgwork.tools.lab.delay import DelayProxy
from pgwork.tools.lab.labdb import LabDatabase
from pgwork.tools.lab.results import Measurement, Outcome
from pgwork.tools.lab.workers import APP, PEER, WORKER, Case, _check, _drain_with_pgqueuer, _drain_with_worker

NAME = "latency"


@dataclass(frozen=True)
class Plan:
    rtts_ms: tuple[float, ...]
    cases: tuple[Case, ...]


def plan(quick: bool) -> Plan:
    if quick:
        return Plan((0.0, 5.0), (Case(1, 1, 100), Case(100, 16, 500)))
    return Plan((0.0, 1.0, 5.0), (Case(1, 1, 1000), Case(10, 4, 5000), Case(100, 16, 10_000)))


def run(lab: LabDatabase, p: Plan, say: Callable[[str], None]) -> Outcome:
    violations: list[str] = []
    rates: dict[tuple[str, str, float], float] = {}
    logs = Path(tempfile.mkdtemp(prefix="pgwork-lab-latency-"))
    for rtt in p.rtts_ms:
        proxy = DelayProxy(lab.dsn, rtt / 1000) if rtt else None
        dsn = proxy.dsn() if proxy else lab.dsn
        fleet = WorkerFleet(dsn, APP, logs, ("--job-types", NOOP_JOB_TYPE, "--grace", "5s"))
        try:
            for case in p.cases:
                _drain_with_worker(
                    fleet, lab.queue, case, name=f"rtt{rtt:g}-b{case.batch}", reset=lab.reset, analyze=lab.analyze
                )
                rates[(WORKER, case.x, rtt)] = _check(f"{NAME} {rtt:g} ms", case, lab.summary(), violations)
                rates[(PEER, case.x, rtt)] = _drain_with_pgqueuer(lab, case, violations, dsn)
                say(
                    f"  {rtt:g} ms, {case.x}: pgwork worker {rates[(WORKER, case.x, rtt)]:.0f} jobs/s, "
                    f"pgqueuer {rates[(PEER, case.x, rtt)]:.0f} jobs/s"
                )
        finally:
            fleet.stop_all()
            if proxy is not None:
                proxy.close()
    shutil.rmtree(logs, ignore_errors=True)
    out: list[Measurement] = []
    for (series, x, rtt), rate in rates.items():
        out.append(Measurement(NAME, f"{series}, {rtt:g} ms RTT", x, "jobs/s", rate, "jobs/s"))
        base = rates.get((series, x, 0.0))
        if base:
            out.append(Measurement(NAME, f"{series}, {rtt:g} ms RTT", x, "of 0 ms", 100 * rate / base, "%"))
    return Outcome(out, violations, len(rates))
