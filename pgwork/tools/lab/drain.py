"""Experiment 5: draining trivial jobs (no work at all), where coordination is all there is.

Batch sizes x concurrent claimers, at the server's default synchronous_commit. Each job is
finished either one fenced `succeed` at a time ("each") or all the batch's fenced completions
in one `succeed_many` statement ("many"). Where the time goes: seconds spent in claims versus
completions, summed over the claimers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pgwork.tools.lab.claimers import ClaimerFleet, ClaimerSpec
from pgwork.tools.lab.labdb import LabDatabase
from pgwork.tools.lab.results import Measurement, Outcome
from pgwork.tools.lab.stats import duplicates, percentile

NAME = "drain"


@dataclass(frozen=True)
class Case:
    batch: int
    finish: str
    claimers: int
    jobs: int

    @property
    def series(self) -> str:
        return f"batch {self.batch}, finish {self.finish}"


@dataclass(frozen=True)
class Plan:
    cases: tuple[Case, ...]


def plan(quick: bool) -> Plan:
    if quick:
        counts: tuple[int, ...] = (1, 2)
        sizes = {1: 1000, 10: 2000}
    else:
        counts = (1, 2, 4, 8, 16)
        sizes = {1: 5_000, 10: 20_000, 100: 30_000}
    cases = []
    for batch, jobs in sizes.items():
        for finish in ("each", "many") if batch > 1 else ("each",):
            cases += [Case(batch, finish, n, jobs) for n in counts]
    return Plan(tuple(cases))


def run(lab: LabDatabase, p: Plan, say: Callable[[str], None]) -> Outcome:
    out: list[Measurement] = []
    violations: list[str] = []
    for case in p.cases:
        lab.fresh_queue(case.jobs)
        limit = case.jobs / 50 / case.claimers + 120
        specs = [
            ClaimerSpec(lab.dsn, f"drain-{i + 1}", "skiplocked", 0.0, limit, batch=case.batch, finish=case.finish)
            for i in range(case.claimers)
        ]
        reports = ClaimerFleet(specs).wait()
        s = lab.summary()
        executed = [j for r in reports for j in r.executed]
        claim_s = sum(r.claim_seconds for r in reports)
        finish_s = sum(r.finish_seconds for r in reports)
        rate = case.jobs / s.seconds if s.seconds > 0 else float("nan")
        claim_ms = [ms for r in reports for ms in r.claim_ms]
        x = str(case.claimers)

        def m(metric: str, value: float | int, unit: str = "", key: tuple[str, str] = (case.series, x)) -> None:
            out.append(Measurement(NAME, key[0], key[1], metric, value, unit))

        m("jobs", case.jobs)
        m("jobs/s", rate, "jobs/s")
        m("claims", len(claim_ms))
        m("claim p50", percentile(claim_ms, 50), "ms")
        m("claim time", claim_s, "s")
        m("finish time", finish_s, "s")
        m("claim share", 100 * claim_s / (claim_s + finish_s) if claim_s + finish_s > 0 else float("nan"), "%")
        m("duplicate executions", duplicates(executed))
        m("succeeded", s.succeeded)
        say(
            f"  {case.series:<22} {case.claimers:>2} claimers: {rate:8.0f} jobs/s, "
            f"claim {claim_s:.2f}s vs finish {finish_s:.2f}s"
        )
        problems = []
        if duplicates(executed):
            problems.append(f"{duplicates(executed)} duplicate executions")
        if s.succeeded != case.jobs or s.results != case.jobs or s.inflated:
            problems.append(f"{s.succeeded}/{case.jobs} succeeded, {s.results} results, {s.inflated} inflated")
        if sum(r.not_created for r in reports):
            problems.append("a fenced completion did not write its result")
        violations += [f"drain {case.series} x{case.claimers}: {p}" for p in problems]
    return Outcome(out, violations, len(p.cases))
