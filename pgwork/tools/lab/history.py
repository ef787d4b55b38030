"""Experiment 3: the claim against a backlog buried under history.

500 pending jobs, then finished rows inserted underneath in stages; at each stage EXPLAIN
(ANALYZE, BUFFERS) of pgwork's own claim statement (rolled back, so the backlog is untouched)
and a run of real claims for latency. Last, the partial claim index is dropped inside a
transaction that is rolled back (the control), and a full index on the same columns is built
to compare sizes.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pgwork.db import claim_statement
from pgwork.tools.lab.labdb import JOB_TYPE, LabDatabase
from pgwork.tools.lab.results import Measurement, Outcome
from pgwork.tools.lab.stats import percentile

NAME = "history"
SIZES = "history-sizes"
LATENCY = "history-latency"
PENDING = 500
EXPLAIN_RUNS = 5


@dataclass(frozen=True)
class Plan:
    stages: tuple[int, ...]  # history rows at each stage, ascending
    explain_at: tuple[int, ...]
    latency_claims: int


def plan(quick: bool) -> Plan:
    if quick:
        return Plan((0, 20_000), (0, 20_000), 100)
    return Plan((0, 100_000, 500_000, 1_000_000), (0, 500_000, 1_000_000), 400)


def describe_plan(node: dict[str, Any]) -> str:
    """A one-line outline of an EXPLAIN (FORMAT JSON) plan: node types, indexes, in preorder."""
    label = str(node.get("Node Type", "?"))
    if "Index Name" in node:
        label += f" using {node['Index Name']}"
    elif node.get("Node Type") == "Seq Scan" and "Relation Name" in node:
        label += f" on {node['Relation Name']}"
    children = node.get("Plans", [])
    if not children:
        return label
    return f"{label} ({', '.join(describe_plan(c) for c in children)})"


def _reads_a_table(node: dict[str, Any]) -> bool:
    if "Relation Name" in node and int(node.get("Actual Loops", 1)) > 0:  # plain EXPLAIN has no loops
        return True
    return any(_reads_a_table(c) for c in node.get("Plans", []))


def claim_scan(node: dict[str, Any]) -> str:
    """How the claim found its row: what runs under the LockRows that read the table (the claim
    has an arm for any type and one for a list of types; the other reads nothing)."""
    if node.get("Node Type") == "LockRows" and node.get("Plans") and _reads_a_table(node):
        return describe_plan(node["Plans"][0])
    for child in node.get("Plans", []):
        found = claim_scan(child)
        if found:
            return found
    return ""


def find_buffers(node: dict[str, Any]) -> int:
    """Shared buffers touched finding and locking the row (the LockRows subtree): the part
    history could make expensive; the rest is the UPDATE writing the row and its index entries."""
    if node.get("Node Type") == "LockRows":
        return int(node.get("Shared Hit Blocks", 0)) + int(node.get("Shared Read Blocks", 0))
    return max((find_buffers(c) for c in node.get("Plans", [])), default=0)


def _explain(lab: LabDatabase) -> dict[str, Any]:
    """EXPLAIN ANALYZE the claim EXPLAIN_RUNS times, each rolled back; median time, last buffers."""
    params = {"owner": "lab-explain", "job_types": [JOB_TYPE], "limit": 1, "lease": 30.0, "now": None}
    # The statement pgwork.claim runs (read back from the installed function), prefixed with EXPLAIN.
    statement = "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + claim_statement(lab.conn)
    times = []
    plan: dict[str, Any] = {}
    for _ in range(EXPLAIN_RUNS):
        with lab.conn.transaction(force_rollback=True):
            row = lab.conn.execute(statement, params).fetchone()
        assert row is not None
        doc = row["QUERY PLAN"][0]
        times.append(float(doc["Execution Time"]))
        plan = doc
    top = plan["Plan"]
    return {
        "plan": describe_plan(top),
        "scan": claim_scan(top),
        "hit": int(top.get("Shared Hit Blocks", 0)),
        "read": int(top.get("Shared Read Blocks", 0)),
        "find": find_buffers(top),
        "ms": statistics.median(times),
    }


def _plan_rows(series: str, x: str, rows: int, sizes: dict[str, int], e: dict[str, Any]) -> list[Measurement]:
    """One EXPLAIN's figures as CSV rows of the history experiment."""
    return [
        Measurement(NAME, series, x, metric, value, unit)
        for metric, value, unit in (
            ("finished rows", rows, ""),
            ("table size", sizes.get("jobs", 0) / 1024, "kB"),
            ("claim scan", e["scan"], ""),
            ("shared hit", e["hit"], "buffers"),
            ("shared read", e["read"], "buffers"),
            ("finding the row", e["find"], "buffers"),
            ("execution", e["ms"], "ms"),
            ("plan", e["plan"], ""),
        )
    ]


def _sizes(lab: LabDatabase) -> dict[str, int]:
    return {str(r["name"]): int(r["bytes"]) for r in lab.run("sizes")}


def _top_up(lab: LabDatabase, first: int) -> int:
    pending = int(lab.one("pending_rows")["rows"])
    if pending < PENDING:
        lab.enqueue(PENDING - pending, first=first)
    return first + max(0, PENDING - pending)


WARM_UP = 20


def _latency(lab: LabDatabase, claims: int) -> list[float]:
    """Claim latency over `claims` claims, after a few unrecorded ones (statements get prepared
    after five runs; caches warm up)."""
    samples = []
    for i in range(claims + WARM_UP):
        t0 = time.perf_counter()
        jobs = lab.queue.claim("lab-latency", job_types=[JOB_TYPE])
        if i >= WARM_UP:
            samples.append((time.perf_counter() - t0) * 1000)
        for job in jobs:
            lab.queue.succeed(job.lease, {"ok": True})
    return samples


def run(lab: LabDatabase, p: Plan, say: Callable[[str], None]) -> Outcome:
    out: list[Measurement] = []
    lab.reset()
    lab.run("old_claim_indexes")  # measured as before the ready ring (dropped from the schema in 24)
    next_payload = _top_up(lab, 0)
    history = 0
    for stage in p.stages:
        if stage > history:
            lab.run("insert_history", {"first": history + 1, "last": stage})
            history = stage
        lab.run("vacuum_analyze")
        next_payload = _top_up(lab, next_payload)
        rows = int(lab.one("history_rows")["rows"])
        x = str(stage)
        sizes = _sizes(lab)
        for name, size in sizes.items():
            out.append(Measurement(SIZES, name, x, "bytes", size, "B"))
        if stage in p.explain_at:
            e = _explain(lab)
            out.extend(_plan_rows("partial index", x, rows, sizes, e))
            say(f"  {rows:>9} history rows: {e['scan']}, {e['hit']} hit + {e['read']} read, {e['ms']:.3f} ms")
        latency = _latency(lab, p.latency_claims)
        out.append(Measurement(LATENCY, "claim", x, "claims", len(latency)))
        out.append(Measurement(LATENCY, "claim", x, "claim p50", percentile(latency, 50), "ms"))
        out.append(Measurement(LATENCY, "claim", x, "claim p95", percentile(latency, 95), "ms"))
        p50, p95 = percentile(latency, 50), percentile(latency, 95)
        say(f"  {rows:>9} history rows: claim p50 {p50:.3f} ms, p95 {p95:.3f} ms")
        next_payload = _top_up(lab, next_payload)

    # The claim index after the stages' churn, rebuilt: what is left is history-independent.
    x = str(history)
    lab.run("reindex_claim_index")
    e = _explain(lab)
    out.extend(_plan_rows("partial index, rebuilt", x, int(lab.one("history_rows")["rows"]), _sizes(lab), e))
    say(f"  claim index rebuilt: {e['hit']} hit + {e['read']} read, {e['find']} finding the row, {e['ms']:.3f} ms")

    # The control, on the largest table: a full index's size, then no claim index at all.
    with lab.conn.transaction(force_rollback=True):
        lab.run("create_full_index")
        full = _sizes(lab).get("jobs_claim_full_idx", 0)
    out.append(Measurement(SIZES, "jobs_claim_full_idx (control, not shipped)", x, "bytes", full, "B"))
    with lab.conn.transaction(force_rollback=True):
        lab.run("drop_claim_index")
        e = _explain(lab)
    rows = int(lab.one("history_rows")["rows"])
    sizes = _sizes(lab)
    out.extend(_plan_rows("no claim index", x, rows, sizes, e))
    say(f"  {rows:>9} history rows, no claim index: {e['scan']}, {e['hit']} hit + {e['read']} read, {e['ms']:.3f} ms")
    lab.run("drop_old_claim_indexes")
    return Outcome(out, [], 0)
