"""Experiment: a fleet of idle `pgwork worker` processes, a burst of long jobs inserted at once.

Issue 13's target for long jobs: 16 idle workers (`--concurrency 1`, waiting on LISTEN), 400
jobs of 200 ms inserted in one transaction, >= 98% of linear from the insert to the last
completion, and a claim p50 <= 1.0 ms. Linear is every worker busy from the insert on:
jobs x seconds / workers. The time is read from the rows (the insert's `created_at` to the last
`completed_at`, the server's clock), and also from the first claim, as the lab's claim
experiment (and the reference write-up) measure it.

The claim latency is the workers' own `pgwork_claim_duration_seconds` histogram, scraped from
each worker's /metrics before and after each round; the difference is the round's claims. A
one-job worker sends its finished job's write and its next claim in one flush (two short
transactions, one round trip), so what it times is that round trip, finish included: it is
shown as the claim round trip, not as the bare claim statement the claimers time. Its p50 is
interpolated inside a bucket; the share under 1 ms is exact (1 ms is a bucket bound).

Side by side in the same rounds: the lab's SKIP LOCKED claimers (one process each, pgwork's
Queue.claim, `time.sleep` as the work), the same jobs and worker count.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import statistics
import tempfile
import time
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from pgwork.models import NewJob
from pgwork.tools.fleet import WorkerFleet
from pgwork.tools.lab import CRASH_JOB_TYPE
from pgwork.tools.lab.claimers import ClaimerFleet, ClaimerSpec
from pgwork.tools.lab.labdb import LabDatabase
from pgwork.tools.lab.results import Measurement, Outcome
from pgwork.tools.lab.stats import duplicates, pct_of_linear, percentile

NAME = "fleet-linear"
APP = "pgwork.tools.lab.crash_app"
WORKER = "pgwork worker --concurrency 1"
CLAIMERS = "lab claimers (skiplocked)"
CLAIM_HISTOGRAM = "pgwork_claim_duration_seconds"

Buckets = list[tuple[float, float]]  # (upper bound in seconds, cumulative count), +Inf last


@dataclass(frozen=True)
class Plan:
    workers: int
    jobs: int
    job_seconds: float
    rounds: int


def plan(quick: bool) -> Plan:
    if quick:
        return Plan(workers=4, jobs=40, job_seconds=0.05, rounds=1)
    return Plan(workers=16, jobs=400, job_seconds=0.2, rounds=3)


def linear_seconds(p: Plan) -> float:
    return p.jobs * p.job_seconds / p.workers


def bucket_quantile(buckets: Buckets, q: float) -> float:
    """The q-quantile of a cumulative histogram, interpolated linearly inside its bucket (as
    Prometheus' histogram_quantile does); NaN without observations. Pure."""
    if not 0 < q < 1:
        raise ValueError(f"q must be within 0..1 exclusive, got {q}")
    if not buckets or buckets[-1][1] <= 0:
        return float("nan")
    rank = q * buckets[-1][1]
    low_bound, low_count = 0.0, 0.0
    for bound, count in buckets:
        if count >= rank:
            if bound == float("inf"):
                return low_bound  # past the largest finite bound: all that can be said
            return low_bound + (bound - low_bound) * (rank - low_count) / max(count - low_count, 1e-12)
        low_bound, low_count = bound, count
    return float("nan")


def share_at_most(buckets: Buckets, bound: float) -> float:
    """The share (0..1) of observations at or under `bound`, which must be a bucket bound. Pure."""
    total = buckets[-1][1] if buckets else 0.0
    for b, count in buckets:
        if b == bound:
            return count / total if total > 0 else float("nan")
    raise ValueError(f"{bound} is not a bucket bound of this histogram")


def subtract(after: Buckets, before: Buckets) -> Buckets:
    """The observations between two scrapes of the same histogram. Pure."""
    earlier = dict(before)
    return [(bound, count - earlier.get(bound, 0.0)) for bound, count in after]


def add(histograms: Sequence[Buckets]) -> Buckets:
    """Several workers' histograms (same bounds) as one. Pure."""
    total: dict[float, float] = {}
    for h in histograms:
        for bound, count in h:
            total[bound] = total.get(bound, 0.0) + count
    return sorted(total.items())


def parse_claim_buckets(text: str) -> Buckets:
    """The claim histogram's cumulative buckets from a /metrics page."""
    for family in text_string_to_metric_families(text):
        if family.name == CLAIM_HISTOGRAM:
            return sorted((float(s.labels["le"]), float(s.value)) for s in family.samples if s.name.endswith("_bucket"))
    raise ValueError(f"no {CLAIM_HISTOGRAM} on the worker's /metrics")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _scrape(port: int) -> Buckets:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as reply:
        return parse_claim_buckets(reply.read().decode())


def _listening(lab: LabDatabase, workers: int, timeout: float = 120.0) -> None:
    """Every worker is idle on LISTEN: the burst must find them waiting, not starting."""
    deadline = time.monotonic() + timeout
    while lab.one("listening_sessions")["n"] < workers:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{NAME}: fewer than {workers} workers listening after {timeout:.0f}s")
        time.sleep(0.1)


def _burst(lab: LabDatabase, p: Plan, timeout: float) -> None:
    lab.reset()
    # One transaction: every worker is woken by the same commit.
    lab.queue.enqueue_many([NewJob(CRASH_JOB_TYPE, {"seconds": p.job_seconds, "n": n}) for n in range(p.jobs)])
    deadline = time.monotonic() + timeout
    while lab.one("fleet_round")["succeeded"] < p.jobs:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{NAME}: {p.jobs} jobs not done in {timeout:.0f}s")
        time.sleep(0.05)


def run(lab: LabDatabase, p: Plan, say: Callable[[str], None]) -> Outcome:
    violations: list[str] = []
    logs = Path(tempfile.mkdtemp(prefix="pgwork-lab-linear-"))
    fleet = WorkerFleet(lab.dsn, APP, logs, ("--job-types", CRASH_JOB_TYPE, "--grace", "5s", "--poll", "5m"))
    ports = [_free_port() for _ in range(p.workers)]
    timeout = linear_seconds(p) * 6 + 60
    figures: dict[str, dict[str, list[float]]] = {WORKER: {}, CLAIMERS: {}}

    def keep(series: str, metric: str, value: float) -> None:
        figures[series].setdefault(metric, []).append(value)

    try:
        lab.reset()
        for i, port in enumerate(ports):
            fleet.start(f"linear-{i + 1}", "--concurrency", "1", "--batch", "1", "--metrics-port", str(port))
        _listening(lab, p.workers)
        for n in range(p.rounds):
            before = [_scrape(port) for port in ports]
            _burst(lab, p, timeout)
            claims = add([subtract(_scrape(port), b) for port, b in zip(ports, before, strict=True)])
            r = lab.one("fleet_round")
            if not int(r["succeeded"]) == int(r["attempts"]) == int(r["results"]) == p.jobs:
                violations.append(
                    f"{NAME} {WORKER}: {r['succeeded']}/{p.jobs} succeeded, {r['attempts']} claims, "
                    f"{r['results']} results"
                )
            from_insert = float(r["from_insert"])
            keep(WORKER, "% of linear (from insert)", 100 * linear_seconds(p) / from_insert)
            keep(WORKER, "% of linear (from first claim)", 100 * linear_seconds(p) / float(r["from_first_claim"]))
            keep(WORKER, "first claim after insert", 1000 * float(r["first_claim_after"]))
            keep(WORKER, "claim round trip p50", 1000 * bucket_quantile(claims, 0.5))
            keep(WORKER, "claims <= 1 ms", 100 * share_at_most(claims, 0.001))
            keep(WORKER, "claims", claims[-1][1] if claims else 0.0)

            lab.fresh_queue(p.jobs)
            specs = [
                ClaimerSpec(lab.dsn, f"skiplocked-{i + 1}", "skiplocked", p.job_seconds, timeout)
                for i in range(p.workers)
            ]
            reports = ClaimerFleet(specs).wait()
            s = lab.summary()
            executed = [job_id for rep in reports for job_id in rep.executed]
            if duplicates(executed) or s.inflated or s.succeeded != p.jobs:
                violations.append(f"{NAME} {CLAIMERS}: {duplicates(executed)} duplicates, {s.succeeded} succeeded")
            rate = p.jobs / s.seconds if s.seconds > 0 else float("nan")
            keep(CLAIMERS, "% of linear (from first claim)", pct_of_linear(rate, p.workers, p.job_seconds))
            keep(CLAIMERS, "claim p50", percentile([ms for rep in reports for ms in rep.claim_ms], 50))
            w, c = {k: v[-1] for k, v in figures[WORKER].items()}, {k: v[-1] for k, v in figures[CLAIMERS].items()}
            say(
                f"  round {n + 1}: {p.workers} workers, {p.jobs} x {p.job_seconds * 1000:.0f} ms: worker "
                f"{w['% of linear (from insert)']:.1f}% of linear from the insert "
                f"({w['% of linear (from first claim)']:.1f}% from the first claim), claim round trip p50 "
                f"{w['claim round trip p50']:.2f} ms ({w['claims <= 1 ms']:.0f}% <= 1 ms); lab claimers "
                f"{c['% of linear (from first claim)']:.1f}%, claim p50 {c['claim p50']:.2f} ms"
            )
    except Exception:
        say(f"  {NAME} failed; worker logs kept in {logs}")
        raise
    else:
        shutil.rmtree(logs, ignore_errors=True)
    finally:
        with contextlib.suppress(Exception):
            fleet.stop_all()
    return Outcome(_measurements(p, figures), violations, p.rounds)


def _measurements(p: Plan, figures: dict[str, dict[str, list[float]]]) -> list[Measurement]:
    x = f"{p.workers} workers"
    out: list[Measurement] = []
    units = {"claim p50": "ms", "claim round trip p50": "ms", "first claim after insert": "ms", "claims": ""}
    for series, metrics in figures.items():
        out += [
            Measurement(NAME, series, x, "jobs", p.jobs),
            Measurement(NAME, series, x, "job length", p.job_seconds, "s"),
            Measurement(NAME, series, x, "rounds", len(next(iter(metrics.values()), []))),
        ]
        for metric, values in metrics.items():
            unit = units.get(metric, "%")
            out.append(Measurement(NAME, series, x, metric, statistics.median(values), unit))
            if metric.startswith("% of linear"):
                out.append(Measurement(NAME, series, x, metric.replace("%", "min %", 1), min(values), unit))
    return out
