"""Experiment 8: the operator's backlog reading at 0 to 10M pending jobs over 100 job types.

At each stage the pending jobs are spread evenly over 100 types, beside 100 running jobs (one per
type) and 1,000 dead ones. Measured on the same table: the database time (EXPLAIN ANALYZE's
execution time) and buffers of the operator's poll (`pgwork.backlog` with the cap a JobQueue of
maxReplicas 20 x targetBacklogPerWorker 10 passes), of the exact reading (`pgwork stats
--exact`), and of the reading of schema versions 1-6 (every live row counted) as the control;
and the poll as the operator times it (`Queue.stats(cap=...)`, a round trip).
Correctness facts: the capped counts are min(count, cap), flagged as lower bounds exactly when
they reached the cap, and the exact counts add up to what was inserted.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, LiteralString

from pgwork.tools.lab import query
from pgwork.tools.lab.labdb import LabDatabase
from pgwork.tools.lab.results import Measurement, Outcome
from pgwork.tools.lab.stats import percentile

NAME = "backlog-reading"
PREFIX = "lab-t"
TYPES = 100
DEAD = 1000
# What pgwork.operator.db.count_cap gives a JobQueue of maxReplicas 20, targetBacklogPerWorker 10.
CAP = 20 * 10 + 1
CAPPED = f"operator poll (capped at {CAP})"
EXACT = "exact (pgwork stats --exact)"
V3 = "queue_stats before schema 7 (control)"


@dataclass(frozen=True)
class Plan:
    pending: tuple[int, ...]  # ascending
    polls: int  # capped readings timed per stage
    slow_runs: int  # runs of the exact and pre-7 readings per stage (seconds each at 10M)


def plan(quick: bool) -> Plan:
    if quick:
        return Plan((0, 20_000), 20, 2)
    return Plan((0, 100_000, 1_000_000, 10_000_000), 50, 3)


def _explain(lab: LabDatabase, statement: LiteralString, runs: int, params: dict[str, Any]) -> dict[str, float]:
    """Database time of `statement` over `runs` EXPLAIN ANALYZE runs (after one to warm the
    session's plan cache, as the operator's pooled connection is): p50, p95, buffers."""
    text: LiteralString = "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + statement
    times = []
    hits = 0
    for i in range(runs + 1):
        row = lab.conn.execute(text, params).fetchone()
        assert row is not None
        doc = row["QUERY PLAN"][0]
        if i > 0:
            times.append(float(doc["Execution Time"]))
            hits = int(doc["Plan"].get("Shared Hit Blocks", 0)) + int(doc["Plan"].get("Shared Read Blocks", 0))
    return {"db time p50": statistics.median(times), "db time p95": percentile(times, 95), "buffers": hits}


UNITS = {"db time p50": "ms", "db time p95": "ms", "buffers": "buffers", "poll p50": "ms", "poll p95": "ms"}


def _check(lab: LabDatabase, size: int, violations: list[str]) -> None:
    capped = {s.job_type: s for s in lab.queue.stats(cap=CAP)}
    exact = {s.job_type: s for s in lab.queue.stats()}
    # 100 running per stage and the pending spread over the types by id modulo 100.
    if sum(s.ready for s in exact.values()) != size or sum(s.running for s in exact.values()) != TYPES:
        violations.append(f"{NAME} at {size}: exact counts do not add up to what was inserted")
    for job_type, s in exact.items():
        c = capped.get(job_type)
        if c is None or c.ready != min(s.ready, CAP) or (("ready" in c.lower_bounds()) != (s.ready >= CAP)):
            violations.append(f"{NAME} at {size}: {job_type} capped {c!r} against exact {s!r}")


def run(lab: LabDatabase, p: Plan, say: Callable[[str], None]) -> Outcome:
    out: list[Measurement] = []
    violations: list[str] = []
    lab.reset()
    # One running job per type (the first 100 ids cover every type), then dead history.
    lab.run("insert_pending", {"prefix": PREFIX, "types": TYPES, "first": 1, "last": TYPES})
    lab.queue.claim("lab-backlog", limit=TYPES, lease=3600.0)
    lab.run("insert_dead", {"prefix": PREFIX, "types": TYPES, "count": DEAD})
    rows = 0
    for size in p.pending:
        if size > rows:
            t0 = time.monotonic()
            step = 1_000_000
            for first in range(rows + 1, size + 1, step):
                last = min(size, first + step - 1)
                lab.run(
                    "insert_pending", {"prefix": PREFIX, "types": TYPES, "first": TYPES + first, "last": TYPES + last}
                )
            rows = size
            say(f"  {size:>10} pending over {TYPES} types written in {time.monotonic() - t0:.0f}s")
        lab.run("vacuum_analyze")
        x = str(size)
        for series, statement, runs in (
            (CAPPED, query("backlog"), p.polls),
            (EXACT, query("exact_backlog"), p.slow_runs),
            (V3, query("v3_queue_stats"), p.slow_runs),
        ):
            e = _explain(lab, statement, runs, {"cap": CAP})
            out += [Measurement(NAME, series, x, k, v, UNITS[k]) for k, v in e.items()]
            say(f"  {size:>10} pending: {series}: {e['db time p50']:.2f} ms database time, {e['buffers']:.0f} buffers")
        polls = []
        for _ in range(p.polls + 1):
            t0 = time.perf_counter()
            lab.queue.stats(cap=CAP)
            polls.append((time.perf_counter() - t0) * 1000)
        polls = polls[1:]
        out += [
            Measurement(NAME, CAPPED, x, "poll p50", percentile(polls, 50), "ms"),
            Measurement(NAME, CAPPED, x, "poll p95", percentile(polls, 95), "ms"),
        ]
        _check(lab, size, violations)
    return Outcome(out, violations, len(p.pending))
