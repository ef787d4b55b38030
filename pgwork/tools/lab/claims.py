"""Experiment 1: claim strategies x worker counts on jobs of fixed length.

Per run: executions, duplicate executions, inflated attempt_counts, jobs/s (database-timed),
% of linear, claim latency p50/p95. Only the skiplocked strategy is pgwork's; its facts (no
duplicate, no inflated attempt, every job done with one result) are checked.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pgwork.tools.lab.claimers import STRATEGIES, ClaimerFleet, ClaimerSpec
from pgwork.tools.lab.labdb import LabDatabase
from pgwork.tools.lab.results import Measurement, Outcome
from pgwork.tools.lab.stats import duplicates, pct_of_linear, percentile

NAME = "claims"


@dataclass(frozen=True)
class Plan:
    strategies: tuple[str, ...]
    workers: tuple[int, ...]
    jobs: int
    jobs_one_worker: int  # one worker at 200 ms takes 80 s for 400 jobs; fewer jobs, same rate
    job_seconds: float
    # Extra skiplocked runs with job lengths spread +-50%, at these worker counts: they show how
    # much of the claim latency comes from workers that all wake in the same millisecond.
    jittered_at: tuple[int, ...] = ()

    def jobs_for(self, workers: int) -> int:
        return self.jobs_one_worker if workers == 1 else self.jobs


def plan(quick: bool) -> Plan:
    if quick:
        return Plan(STRATEGIES, (2, 4), 40, 40, 0.05, jittered_at=(4,))
    return Plan(STRATEGIES, (1, 2, 4, 8, 16), 400, 100, 0.2, jittered_at=(8, 16))


JITTER = 0.5
JITTERED = "skiplocked, jobs +-50%"


def runs(p: Plan) -> list[tuple[str, str, int, float]]:
    """(series, strategy, workers, jitter) for every run of the plan, in order."""
    out = [(s, s, w, 0.0) for s in p.strategies for w in p.workers]
    return out + [(JITTERED, "skiplocked", w, JITTER) for w in p.jittered_at]


def deadline(jobs: int, workers: int, job_seconds: float) -> float:
    """Generous: the naive strategy does several times the work at high worker counts."""
    return jobs * job_seconds * 6 / workers + 60


def run(lab: LabDatabase, p: Plan, say: Callable[[str], None]) -> Outcome:
    out: list[Measurement] = []
    violations: list[str] = []
    facts = 0
    for series, strategy, workers, jitter in runs(p):
        jobs = p.jobs_for(workers)
        lab.fresh_queue(jobs)
        limit = deadline(jobs, workers, p.job_seconds)
        specs = [
            ClaimerSpec(lab.dsn, f"{strategy}-{i + 1}", strategy, p.job_seconds, limit, jitter=jitter)
            for i in range(workers)
        ]
        reports = ClaimerFleet(specs).wait()
        s = lab.summary()
        executed = [job_id for r in reports for job_id in r.executed]
        claim_ms = [ms for r in reports for ms in r.claim_ms]
        dup = duplicates(executed)
        rate = jobs / s.seconds if s.seconds > 0 else float("nan")

        def m(
            metric: str, value: float | int | str, unit: str = "", key: tuple[str, str] = (series, str(workers))
        ) -> None:
            out.append(Measurement(NAME, key[0], key[1], metric, value, unit))

        m("jobs", jobs)
        m("job length", p.job_seconds, "s")
        m("executions", len(executed))
        m("duplicate executions", dup)
        m("inflated attempt_counts", s.inflated)
        m("max attempt_count", s.max_attempt)
        m("succeeded", s.succeeded)
        m("seconds", s.seconds, "s")
        m("jobs/s", rate, "jobs/s")
        m("% of linear", pct_of_linear(rate, workers, p.job_seconds) if s.seconds > 0 else float("nan"), "%")
        m("claim p50", percentile(claim_ms, 50), "ms")
        m("claim p95", percentile(claim_ms, 95), "ms")
        # Where the gap to linear goes: time each job spent being claimed and finished.
        coordination = sum(r.claim_seconds + r.finish_seconds for r in reports)
        m("claim+finish per job", 1000 * coordination / max(1, len(executed)), "ms")
        m("empty claims", sum(r.empty_claims for r in reports))
        if strategy == "advisory":
            m("lost races", sum(r.lost_races for r in reports))
        say(
            f"  {series:<10} {workers:>2} workers: {len(executed)} executions for {jobs} jobs "
            f"({dup} duplicate), {s.inflated} inflated attempt_counts, {rate:.1f} jobs/s, "
            f"claim p50 {percentile(claim_ms, 50):.2f} ms"
        )
        if strategy == "skiplocked":
            facts += 1
            problems = []
            if dup:
                problems.append(f"{dup} duplicate executions")
            if s.inflated:
                problems.append(f"{s.inflated} jobs with attempt_count > 1")
            if s.succeeded != jobs or s.results != jobs:
                problems.append(f"{s.succeeded}/{jobs} succeeded, {s.results} result rows")
            if sum(r.not_created for r in reports):
                problems.append("a fenced completion did not write its result")
            violations += [f"claims skiplocked x{workers}: {p}" for p in problems]
    return Outcome(out, violations, facts)
