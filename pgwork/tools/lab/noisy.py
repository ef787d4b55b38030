"""Experiment 7: the noisy neighbour. Claims for job type B while type A has a growing backlog.

At each stage (A pending: 0, 100k, 1M; small sizes in --quick) B keeps a few hundred pending
jobs. Measured on the same table: EXPLAIN (ANALYZE, BUFFERS) of pgwork's claim for B, of pgwork's
claim for any type, and of the claim of schema versions 2-6 (its index had no job type, so A's
rows were read and filtered) as the control; then real `Queue.claim` calls for B, timed.
Correctness facts: every claim for B returns a B job, claimed once, on its first attempt.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, LiteralString

from pgwork.db import claim_statement
from pgwork.tools.lab import plans, query
from pgwork.tools.lab.labdb import LabDatabase, wait_for_next_segment
from pgwork.tools.lab.results import Measurement, Outcome
from pgwork.tools.lab.stats import percentile

NAME = "noisy-neighbour"
A = "lab-a"
B = "lab-b"
TYPED = "pgwork claim for B"
ANY = "pgwork claim, any type"
V3 = "claim before schema 7 (control)"
EXPLAIN_RUNS = 5
FUNCTION_SETTINGS: tuple[LiteralString, ...] = (
    "SET LOCAL plan_cache_mode = force_generic_plan",
    "SET LOCAL enable_seqscan = off",
    "SET LOCAL jit = off",
)
WARM_UP = 20


@dataclass(frozen=True)
class Plan:
    a_pending: tuple[int, ...]  # ascending
    claims: int  # timed claims for B per stage


def plan(quick: bool) -> Plan:
    if quick:
        return Plan((0, 20_000), 60)
    return Plan((0, 100_000, 1_000_000), 400)


def _explain(lab: LabDatabase, statement: LiteralString, job_types: list[str] | None) -> dict[str, Any]:
    """EXPLAIN ANALYZE `statement` EXPLAIN_RUNS times, each rolled back: median time, last plan."""
    params = {"owner": "lab-explain", "job_types": job_types, "limit": 1, "lease": 30.0, "now": None}
    text: LiteralString = "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + statement
    times = []
    top: dict[str, Any] = {}
    for _ in range(EXPLAIN_RUNS):
        with lab.conn.transaction(force_rollback=True):
            # The plan pgwork.claim runs: generic (made without the type or the limit), under the
            # settings the function sets for itself.
            for setting in FUNCTION_SETTINGS:
                lab.conn.execute(setting)
            row = lab.conn.execute(text, params).fetchone()
        assert row is not None
        times.append(float(row["QUERY PLAN"][0]["Execution Time"]))
        top = row["QUERY PLAN"][0]["Plan"]
    return {
        "claim scan": plans.scans_run(top),
        "finding the row": plans.locking_buffers(top),
        "shared hit": int(top.get("Shared Hit Blocks", 0)) + int(top.get("Shared Read Blocks", 0)),
        "rows removed by filter": plans.locking_filtered(top),
        "execution": statistics.median(times),
    }


UNITS = {"finding the row": "buffers", "shared hit": "buffers", "execution": "ms"}


def _claims(lab: LabDatabase, count: int, violations: list[str], x: str) -> list[float]:
    samples = []
    for i in range(count + WARM_UP):
        t0 = time.perf_counter()
        jobs = lab.queue.claim("lab-noisy", job_types=[B])
        elapsed = (time.perf_counter() - t0) * 1000
        if i >= WARM_UP:
            samples.append(elapsed)
        if len(jobs) != 1 or jobs[0].job_type != B or jobs[0].lease.attempt != 1:
            violations.append(f"{NAME} at {x} pending {A}: a claim for {B} returned {jobs!r}")
        for job in jobs:
            lab.queue.succeed(job.lease, {"ok": True})
    return samples


def _fresh_b(lab: LabDatabase, wanted: int, first: int) -> int:
    """B's pending jobs written anew, behind all of A's and in a later ring segment: the case where
    a claim that cannot tell the types apart in its index walks A's whole backlog before the first
    B, and where statistics see A's segment holding A alone (before migration 29 the generic plan
    then read that segment through its any-type index, filtering on the type)."""
    wait_for_next_segment(lab.conn)
    lab.run("delete_pending_of_type", {"job_type": B})
    lab.run("insert_pending", {"prefix": B, "types": 1, "first": first, "last": first + wanted - 1})
    return first + wanted


def run(lab: LabDatabase, p: Plan, say: Callable[[str], None]) -> Outcome:
    out: list[Measurement] = []
    violations: list[str] = []
    lab.reset()
    lab.run("old_claim_indexes")  # the v3 control's index (dropped from the schema in 24)
    typed = claim_statement(lab.conn)
    any_type = claim_statement(lab.conn, any_type=True)  # its own statement since migration 28
    v3 = query("v3_claim")
    next_b = 1
    a_rows = 0
    for size in p.a_pending:
        if size > a_rows:
            lab.run("insert_pending", {"prefix": A, "types": 1, "first": a_rows + 1, "last": size})
            a_rows = size
        next_b = _fresh_b(lab, p.claims + WARM_UP + 50, next_b)
        lab.run("vacuum_analyze")
        x = str(size)
        for series, statement, types in ((TYPED, typed, [B]), (ANY, any_type, None), (V3, v3, [B])):
            e = _explain(lab, statement, types)
            out += [Measurement(NAME, series, x, k, v, UNITS.get(k, "")) for k, v in e.items()]
            say(
                f"  {size:>9} pending {A}: {series}: {e['finding the row']} buffers to find the row, "
                f"{e['rows removed by filter']} rows filtered, {e['execution']:.3f} ms ({e['claim scan']})"
            )
        samples = _claims(lab, p.claims, violations, x)
        p50, p95 = percentile(samples, 50), percentile(samples, 95)
        out += [
            Measurement(NAME, TYPED, x, "claims", len(samples)),
            Measurement(NAME, TYPED, x, "claim p50", p50, "ms"),
            Measurement(NAME, TYPED, x, "claim p95", p95, "ms"),
        ]
        say(f"  {size:>9} pending {A}: Queue.claim for {B}: p50 {p50:.3f} ms, p95 {p95:.3f} ms")
    lab.run("drop_old_claim_indexes")
    return Outcome(out, violations, len(p.a_pending))
