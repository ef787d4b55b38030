"""docs/benchmarks.md sections 11 and 12: many job types on one database (issue 14's targets). Pure."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from pgwork.tools.lab import backlog, noisy
from pgwork.tools.lab.pivot import Table, fmt, pivot, render_pivot, run_note, select
from pgwork.tools.lab.results import Row

# Issue 14 set "<= 10 buffers" when one index held every pending job. Since schema 23 the claim
# enters each of the ready ring's 8 segments by its own index, a descent each whatever the backlog,
# so the target is what it stood for: A's backlog adds at most one index level per segment.
CLAIM_TARGET = (
    "claim for B with 1M pending A: buffers to find the row at most 8 above no backlog (one index level per "
    "ring segment), p50 within 20% of no backlog"
)
POLL_TARGET = "operator poll with 10M pending over 100 types: <= 20 ms database time"


_SEGMENT_SCAN = re.compile(r"^(.*\bready_)(\d)((?!\d).*)$")


def fold_segments(scans: str) -> str:
    """A plan's scan list with the ready ring's per-segment scans written once: `Index Scan using
    ready_0_x, ..., ready_7_x` as `Index Scan using ready_{0-7}_x` (pure; first appearance's order)."""
    order: list[str | tuple[str, str]] = []
    segments: dict[tuple[str, str], list[int]] = {}
    for item in scans.split(", "):
        match = _SEGMENT_SCAN.match(item)
        if match is None:
            order.append(item)
            continue
        key = (match.group(1), match.group(3))
        if key not in segments:
            segments[key] = []
            order.append(key)
        segments[key].append(int(match.group(2)))
    return ", ".join(item if isinstance(item, str) else _folded(item, segments[item]) for item in order)


def _folded(key: tuple[str, str], numbers: list[int]) -> str:
    head, tail = key
    if len(numbers) == 1:
        span = str(numbers[0])
    elif numbers == list(range(numbers[0], numbers[0] + len(numbers))):
        span = f"{{{numbers[0]}-{numbers[-1]}}}"
    else:
        span = "{" + ",".join(str(n) for n in numbers) + "}"
    return f"{head}{span}{tail}"


def _largest(t: Table, series: str) -> str:
    xs = [int(x) for s, x in t.keys if s == series]
    return str(max(xs)) if xs else ""


def claim_verdict(t: Table, mode: str) -> str:
    top = _largest(t, noisy.TYPED)
    if not top or (noisy.TYPED, "0") not in t.keys:
        return "not run"
    found, idle = t.value(noisy.TYPED, top, "finding the row"), t.value(noisy.TYPED, "0", "finding the row")
    base, there = t.value(noisy.TYPED, "0", "claim p50"), t.value(noisy.TYPED, top, "claim p50")
    change = 100 * (there - base) / base if base > 0 else math.nan
    figure = (
        f"{found:.0f} buffers to find the row at {int(top):,} pending A ({idle:.0f} at none); "
        f"p50 {fmt(str(base), 'ms')} ms -> {fmt(str(there), 'ms')} ms ({change:+.0f}%)"
    )
    if mode != "full":
        return f"{figure}: not judged (quick run)"
    if int(top) < 1_000_000:
        return f"{figure}: not judged (1M not run)"
    return f"{figure}: {'met' if found <= idle + 8 and change <= 20 else 'not met'}"


def poll_verdict(t: Table, mode: str) -> str:
    top = _largest(t, backlog.CAPPED)
    if not top:
        return "not run"
    ms = t.value(backlog.CAPPED, top, "db time p50")
    figure = f"{fmt(str(ms), 'ms')} ms database time at {int(top):,} pending over {backlog.TYPES} types"
    if mode != "full":
        return f"{figure}: not judged (quick run)"
    if int(top) < 10_000_000:
        return f"{figure}: not judged (10M not run)"
    return f"{figure}: {'met' if ms <= 20 else 'not met'}"


def render(rows: Sequence[Row], plots: Sequence[str]) -> list[str]:
    parts: list[str] = []
    n = select(rows, noisy.NAME)
    parts += ["## 11. Noisy neighbour: a claim beside another type's backlog", "", run_note(n), ""]
    parts += [
        "Type A gets a backlog written ahead of B's jobs (older, same priority); B has a few hundred pending, "
        "written in a later ready ring segment than A's (the experiment waits for the next one), and the ring "
        "and the jobs table are analyzed as autovacuum would. EXPLAIN (ANALYZE, BUFFERS) of one claim, rolled "
        "back, on the same table, as the generic plan pgwork.claim runs (plan_cache_mode = force_generic_plan and "
        "the function's other settings): pgwork's claim for B (one scan per type of each ring segment's "
        "`(job_type, priority, available_at, job_id)` index since schema 23, `jobs_claim_type_idx` before), "
        "pgwork's claim for any type (each segment's `(priority, available_at, job_id)` index; `jobs_claim_idx` "
        "before 23), and the claim of schema versions 2-6 for B (`jobs_claim_idx` only, the type a filter, "
        "rebuilt for the run) as the control. `finding the row` counts the locking scans' buffers; `rows removed "
        "by filter` the rows they read and threw away. `claim p50/p95` are real `Queue.claim` calls for B, "
        "committed. Runs before 2026-12-05 explained a custom plan, never analyzed the ring and wrote B in A's "
        "segment: they could not see what migration 29 fixed (docs/benchmarks.md section 20).",
        "",
    ]
    if n:
        t = pivot(n)
        for key, cell in list(t.cells.items()):
            if key[2] == "claim scan":
                t.cells[key] = fold_segments(cell)
        parts += [render_pivot(t, "claim", "pending A", x_first=True), ""]
        parts += [f"Target: {CLAIM_TARGET}. Here: {claim_verdict(t, n[0].mode)}.", ""]
    parts += [f"![{p}]({p})" for p in plots if "noisy" in p]
    parts.append("")

    b = select(rows, backlog.NAME)
    parts += ["## 12. The operator's backlog reading at millions of rows", "", run_note(b), ""]
    parts += [
        f"Pending jobs spread over {backlog.TYPES} job types, beside {backlog.TYPES} running and "
        f"{backlog.DEAD:,} dead. Database time is EXPLAIN ANALYZE's execution time on a session that has read "
        "once (as the operator's pooled connection has). The operator's poll counts each type and status up to "
        f"its cap ({backlog.CAP} = maxReplicas 20 x targetBacklogPerWorker 10 + 1) and reads ages from index "
        "heads; `exact` is `pgwork stats --exact`; the control is the reading of schema versions 1-6, which "
        "counted every live row. `poll p50/p95` are `Queue.stats(cap=...)` round trips.",
        "",
    ]
    if b:
        t = pivot(b)
        parts += [render_pivot(t, "reading", "pending", x_first=True), ""]
        parts += [f"Target: {POLL_TARGET}. Here: {poll_verdict(t, b[0].mode)}.", ""]
    parts += [f"![{p}]({p})" for p in plots if "backlog" in p]
    parts.append("")
    return parts
