"""Experiment: a fleet of real `pgwork worker` processes through a real PgBouncer in transaction
mode (pool of 10 server connections) beside the same fleet connected directly.

Every worker runs with PGWORK_POOLER=transaction through the pooler (no prepared statements, no
LISTEN: they poll) and as it comes directly (LISTEN on, prepared statements on). The jobs are
inserted in one transaction once every worker answers on /metrics; the round ends when all are
done. Read from the rows: every job once (succeeded = claims = results = jobs), the drain rate
from the first claim to the last completion; from the workers' /metrics: the claim round trip
p50/p99 (the histogram of pgwork_claim_duration_seconds, interpolated in its bucket); from the
server: the most connections serving workers at once (sampled every 20 ms), which through the
pooler must never pass its pool; from the logs: WARNING/ERROR lines and tracebacks (zero
expected). The direct fleet runs only where the server has the connections for it.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pgwork.budget import worker_connections
from pgwork.models import NewJob
from pgwork.tools.fleet import WorkerFleet
from pgwork.tools.lab import CRASH_JOB_TYPE, pgbouncer
from pgwork.tools.lab.labdb import LabDatabase
from pgwork.tools.lab.linear import Buckets, _free_port, _scrape, add, bucket_quantile, subtract
from pgwork.tools.lab.results import Measurement, Outcome

NAME = "pooler"
APP = "pgwork.tools.lab.crash_app"
POOL = 10


@dataclass(frozen=True)
class Plan:
    workers: int
    jobs: int
    job_seconds: float
    pool: int = POOL


def plan(quick: bool) -> Plan:
    if quick:
        return Plan(workers=4, jobs=200, job_seconds=0.005)
    return Plan(workers=100, jobs=5000, job_seconds=0.01)


def _ready(ports: list[int], timeout: float) -> list[Buckets]:
    """Each worker's claim histogram once all of them answer on /metrics."""
    deadline = time.monotonic() + timeout
    before: list[Buckets] = []
    for port in ports:
        while True:
            try:
                before.append(_scrape(port))
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{NAME}: a worker did not start within {timeout:.0f}s") from None
                time.sleep(0.1)
    return before


class _Sampler(threading.Thread):
    """The most server connections serving workers at once, every 20 ms, until stopped."""

    def __init__(self, lab: LabDatabase) -> None:
        super().__init__(daemon=True)
        self.lab = lab
        self.peak = 0
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.wait(0.02):
            self.peak = max(self.peak, int(self.lab.one("worker_backends")["n"]))


def _round(lab: LabDatabase, p: Plan, dsn: str, pooled: bool, logs: Path) -> dict[str, float]:
    lab.reset()
    fleet = WorkerFleet(dsn, APP, logs, ("--job-types", CRASH_JOB_TYPE, "--poll", "50ms", "--grace", "5s"))
    if pooled:
        fleet.env["PGWORK_POOLER"] = "transaction"
    else:
        fleet.env.pop("PGWORK_POOLER", None)
    ports = [_free_port() for _ in range(p.workers)]
    sampler = _Sampler(lab)
    try:
        for i, port in enumerate(ports):
            fleet.start(f"{'pooled' if pooled else 'direct'}-{i + 1}", "--metrics-port", str(port))
        before = _ready(ports, 60 + p.workers)
        sampler.start()
        lab.queue.enqueue_many([NewJob(CRASH_JOB_TYPE, {"seconds": p.job_seconds, "n": n}) for n in range(p.jobs)])
        deadline = time.monotonic() + 60 + p.jobs * p.job_seconds * 4
        while lab.one("fleet_round")["succeeded"] < p.jobs:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{NAME}: {p.jobs} jobs not done in time")
            time.sleep(0.05)
        claims = add([subtract(_scrape(port), b) for port, b in zip(ports, before, strict=True)])
    finally:
        sampler.stop.set()
        with contextlib.suppress(Exception):
            fleet.stop_all()
    r = lab.one("fleet_round")
    text = "".join(w.log() for w in fleet)
    return {
        "once": float(int(r["succeeded"]) == int(r["attempts"]) == int(r["results"]) == p.jobs),
        "jobs/s": p.jobs / float(r["from_first_claim"]),
        "claim round trip p50": 1000 * bucket_quantile(claims, 0.5),
        "claim round trip p99": 1000 * bucket_quantile(claims, 0.99),
        "peak server connections": float(sampler.peak),
        "errors": float(text.count(" ERROR ") + text.count(" WARNING ") + text.count("Traceback")),
    }


def run(lab: LabDatabase, p: Plan, say: Callable[[str], None]) -> Outcome:
    violations: list[str] = []
    figures: dict[str, dict[str, float]] = {}
    logs = Path(tempfile.mkdtemp(prefix="pgwork-lab-pooler-"))
    bouncer = pgbouncer.start(lab.admin_dsn, pool_size=p.pool)
    try:
        series = f"pgbouncer transaction, pool {p.pool}"
        figures[series] = _round(lab, p, bouncer.pooled(lab.dsn), True, logs / "pooled")
        limits = lab.queue.connection_limits()
        needed = p.workers * worker_connections(1, listening=True).busy
        if needed <= limits.max_connections - limits.reserved - 5:
            figures["direct"] = _round(lab, p, lab.dsn, False, logs / "direct")
        else:
            say(f"  direct: not run, {p.workers} workers may hold {needed} connections; the server allows "
                f"{limits.max_connections - limits.reserved}")  # fmt: skip
    except Exception:
        say(f"  {NAME} failed; worker logs kept in {logs}")
        raise
    else:
        shutil.rmtree(logs, ignore_errors=True)
    finally:
        bouncer.stop()
    for name, f in figures.items():
        if not f["once"] or f["errors"]:
            violations.append(f"{NAME} {name}: every job once {bool(f['once'])}, {f['errors']:.0f} error lines")
        if name != "direct" and f["peak server connections"] > p.pool:
            violations.append(f"{NAME} {name}: {f['peak server connections']:.0f} server connections > pool {p.pool}")
        say(
            f"  {name}: {p.workers} workers, {p.jobs} jobs: {f['jobs/s']:.0f} jobs/s, claim round trip p50 "
            f"{f['claim round trip p50']:.2f} ms p99 {f['claim round trip p99']:.2f} ms, peak server connections "
            f"{f['peak server connections']:.0f}, {f['errors']:.0f} error lines"
        )
    return Outcome(_measurements(p, figures), violations, len(figures))


def _measurements(p: Plan, figures: dict[str, dict[str, float]]) -> list[Measurement]:
    x = f"{p.workers} workers"
    units = {"jobs/s": "jobs/s", "claim round trip p50": "ms", "claim round trip p99": "ms"}
    out: list[Measurement] = []
    for series, f in figures.items():
        out.append(Measurement(NAME, series, x, "jobs", p.jobs))
        out += [Measurement(NAME, series, x, k, v, units.get(k, "")) for k, v in f.items() if k != "once"]
    return out
