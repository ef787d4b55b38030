"""The chaos run's invariants: counts read by `invariants.sql`, judged by a pure function."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from pgwork.db import AnyConnection
from pgwork.tools.chaos import SQL

REAPER_APP = "pgwork-chaos-reaper"


@dataclass(frozen=True)
class InvariantCounts:
    jobs: int
    succeeded: int
    dead: int
    stuck: int
    running: int
    results: int
    missing_results: int
    orphan_results: int
    duplicate_successes: int
    duplicate_results: int
    results_not_by_holder: int
    stale_writes: int
    stolen_leases: int
    claims: int
    attempt_mismatches: int
    reclaims: int
    reclaimed_from_paused: int
    writes_after_resume: int
    late_completions: int

    @property
    def stale_owner_writes(self) -> int:
        """All writes attributable to an owner whose lease was no longer live."""
        return self.stale_writes + self.writes_after_resume + self.results_not_by_holder


def read(conn: AnyConnection) -> InvariantCounts:
    row = conn.execute(SQL.query("figures"), {"reaper": REAPER_APP}).fetchone()
    assert row is not None
    names = {f.name for f in dataclasses.fields(InvariantCounts)}
    return InvariantCounts(**{k: int(v) for k, v in dict(row).items() if k in names})


def violations(
    f: InvariantCounts, *, expected_jobs: int, worker_crashes: int = 0, password_leaks: int = 0
) -> list[str]:
    """Every broken invariant, in words. Empty means the run kept every promise."""
    out: list[str] = []

    def must_be_zero(value: int, what: str) -> None:
        if value:
            out.append(f"{value} {what}")

    lost = expected_jobs - f.jobs
    if lost:
        out.append(f"{lost} jobs lost (enqueued {expected_jobs}, found {f.jobs})")
    must_be_zero(f.stuck, "jobs neither succeeded nor dead after the final reap")
    must_be_zero(f.running, "jobs still running after the final reap")
    must_be_zero(f.missing_results, "succeeded jobs without their result row")
    must_be_zero(f.orphan_results, "result rows whose job did not succeed")
    must_be_zero(f.duplicate_successes, "jobs marked succeeded more than once")
    must_be_zero(f.duplicate_results, "jobs with more than one result row")
    must_be_zero(f.results_not_by_holder, "results not produced by the holder of the succeeding lease")
    must_be_zero(f.stale_writes, "writes by a worker that did not hold the lease it ended")
    must_be_zero(f.stolen_leases, "claims that took a job another live lease held")
    must_be_zero(f.attempt_mismatches, "jobs whose attempt_count differs from their logged claims")
    must_be_zero(f.writes_after_resume, "writes by a resumed worker about a job reclaimed while it was stopped")
    must_be_zero(worker_crashes, "worker exits nobody caused (crash loop)")
    must_be_zero(password_leaks, "log files containing the database password")
    if f.succeeded + f.dead + f.stuck != f.jobs:
        out.append(f"status counts do not add up: {f.succeeded}+{f.dead}+{f.stuck} != {f.jobs}")
    return out


def lost_jobs(f: InvariantCounts, expected_jobs: int) -> int:
    return max(0, expected_jobs - f.jobs) + f.missing_results


def as_rows(pairs: list[tuple[str, Any]]) -> list[dict[str, Any]]:
    return [{"figure": k, "value": v} for k, v in pairs]
