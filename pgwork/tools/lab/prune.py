"""Experiment 8: retention under load, and whether head-of-index churn needs a REINDEX.

N succeeded jobs a month old lie under a backlog that a claimer works through (claim one, succeed
it, again), timing each `Queue.claim`. First the claimer runs alone, then while `Queue.prune`
deletes the N rows in batches, each batch its own transaction, timed from the client (a batch's
time is its whole transaction). `0002 prune` is the same prune through the first migration's
unordered batches, on a second set of N rows, for comparison. Finally the claim index, churned at
its head by every claim so far, is rebuilt with `REINDEX INDEX CONCURRENTLY`, and the claim is
timed again: what the rebuild gives back is what churn costs.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

from pgwork.db import Queue
from pgwork.tools.lab.labdb import LabDatabase
from pgwork.tools.lab.results import Measurement, Outcome
from pgwork.tools.lab.stats import percentile

NAME = "prune"
AGE = timedelta(days=7)


@dataclass(frozen=True)
class Plan:
    finished: int
    backlog: int
    alone_seconds: float
    batch: int


def plan(quick: bool) -> Plan:
    return Plan(20_000, 5_000, 1.0, 2_000) if quick else Plan(1_000_000, 200_000, 10.0, 10_000)


class Claimer(threading.Thread):
    """Claims and finishes one job at a time until stopped, timing each claim."""

    def __init__(self, dsn: str) -> None:
        super().__init__(daemon=True)
        self.queue = Queue(dsn, pool_size=1, application_name="pgwork-lab-claimer")
        self.stop = threading.Event()
        self.claim_ms: list[float] = []

    def run(self) -> None:
        while not self.stop.is_set():
            started = time.perf_counter()
            jobs = self.queue.claim("lab-claimer", lease=60)
            self.claim_ms.append(1000 * (time.perf_counter() - started))
            if jobs:
                self.queue.succeed_many([(j.lease, None) for j in jobs])

    def window(self, action: Callable[[], None]) -> list[float]:
        """The claim times taken while `action` ran."""
        first = len(self.claim_ms)
        action()
        return self.claim_ms[first:]


def _old_prune(lab: LabDatabase, batch: int, seconds: list[float]) -> int:
    total = 0
    while True:
        started = time.perf_counter()
        deleted = int(lab.one("old_prune", {"batch": batch, "older_than": AGE.total_seconds()})["deleted"])
        seconds.append(time.perf_counter() - started)
        total += deleted
        if deleted < batch:
            return total


def run(lab: LabDatabase, p: Plan, say: Callable[[str], None]) -> Outcome:
    lab.reset()
    lab.run("old_claim_indexes")  # the REINDEX below rebuilds jobs_claim_idx (dropped from the schema in 24)
    lab.run("pending_backlog", {"jobs": p.backlog})
    lab.run("insert_history", {"first": 1, "last": p.finished})
    lab.run("vacuum_analyze")
    claimer = Claimer(lab.dsn)
    claimer.start()
    out: list[Measurement] = []
    violations: list[str] = []
    try:
        alone = claimer.window(lambda: time.sleep(p.alone_seconds))
        runs: dict[str, tuple[list[float], list[float], int, float]] = {}
        for way in ("prune_batch", "0002 prune"):
            if way == "0002 prune":
                lab.run("insert_history", {"first": p.finished + 1, "last": 2 * p.finished})
                lab.run("vacuum_analyze")
            batches: list[float] = []
            deleted = [0]

            def prune(way: str = way, batches: list[float] = batches, deleted: list[int] = deleted) -> None:
                if way == "prune_batch":
                    deleted[0] = lab.queue.prune(AGE, batch=p.batch, on_progress=lambda b: batches.append(b.seconds))
                else:
                    deleted[0] = _old_prune(lab, p.batch, batches)

            started = time.perf_counter()
            during = claimer.window(prune)
            runs[way] = (during, batches, deleted[0], time.perf_counter() - started)
            if lab.one("prune_facts")["old"] != 0 or deleted[0] != p.finished:
                violations.append(f"prune/{way}: deleted {deleted[0]} of {p.finished} old rows")
        churned = claimer.window(lambda: time.sleep(p.alone_seconds))
        started = time.perf_counter()
        lab.run("reindex_claim_index_concurrently")
        reindex_s = time.perf_counter() - started
        rebuilt = claimer.window(lambda: time.sleep(p.alone_seconds))
    finally:
        claimer.stop.set()
        claimer.join()
        claimer.queue.close()
    if lab.one("prune_facts")["live"] == 0:
        violations.append("prune: the claimer ran out of backlog; the claim figures are of empty claims")

    def m(series: str, metric: str, value: float | int, unit: str = "") -> None:
        out.append(Measurement(NAME, series, str(p.finished), metric, value, unit))

    def claims(series: str, ms: list[float]) -> None:
        m(series, "claims", len(ms))
        m(series, "claim p50", percentile(ms, 50), "ms")
        m(series, "claim p99", percentile(ms, 99), "ms")

    claims("no prune", alone)
    for way, (during, batches, gone, seconds) in runs.items():
        series = f"during {way}"
        claims(series, during)
        m(series, "rows deleted", gone)
        m(series, "batch size", p.batch, "rows")
        m(series, "batches", len(batches))
        m(series, "longest batch transaction", max(batches, default=0.0), "s")
        m(series, "prune rows/s", gone / seconds if seconds > 0 else float("nan"), "rows/s")
        m(series, "claim p99 vs no prune", percentile(during, 99) / percentile(alone, 99), "x")
        say(
            f"  {way:<11} {gone:,} rows in {seconds:.1f}s, longest batch {max(batches, default=0):.3f}s; "
            f"claim p99 {percentile(during, 99):.2f} ms vs {percentile(alone, 99):.2f} ms alone"
        )
    claims("churned claim index", churned)
    claims("after REINDEX CONCURRENTLY", rebuilt)
    m("after REINDEX CONCURRENTLY", "reindex", reindex_s, "s")
    say(
        f"  claim p50 churned {percentile(churned, 50):.3f} ms, after REINDEX CONCURRENTLY "
        f"{percentile(rebuilt, 50):.3f} ms (rebuild {reindex_s:.2f}s)"
    )
    lab.reset()
    lab.run("drop_old_claim_indexes")
    return Outcome(out, violations, 1 + len(runs))
