"""The backfill and retention sections of docs/benchmarks.md (experiments `bulk` and `prune`), with
their targets judged on full runs. Pure: rows in, markdown lines out."""

from __future__ import annotations

import math
from collections.abc import Sequence

from pgwork.tools.lab.pivot import fmt, pivot, render_pivot, run_note, select
from pgwork.tools.lab.results import Row


def _verdict(rows: Sequence[Row], ok: bool) -> str:
    if rows[0].mode != "full":
        return "not judged (quick run)"
    return "met" if ok else "not met"


def sections(rows: Sequence[Row]) -> list[str]:
    parts: list[str] = []
    bulk = select(rows, "bulk")
    parts += ["## 9. Bulk enqueue for a backfill", "", run_note(bulk), ""]
    parts += [
        "The same payloads loaded three ways into an emptied jobs table, in the same run: `raw COPY` straight "
        "into `pgwork.jobs` with no validation and keys made up by the loader (the floor); `load_jobs` (what "
        "`pgwork enqueue --from-file` uses: validated, keys derived, COPY straight into the table); "
        "`enqueue_many` (the same through a staging table, so the ids come back in order). Client wall clock, "
        "making the payloads included; the median of the rounds, which alternate the order.",
        "",
    ]
    if bulk:
        t = pivot(bulk)
        parts += [render_pivot(t, "path", "jobs"), ""]
        for way in ("load_jobs", "enqueue_many"):
            share = max((t.value(way, x, "share of raw COPY") for s, x in t.keys if s == way), default=math.nan)
            if not math.isnan(share):
                verdict = _verdict(bulk, share >= 50)
                parts.append(f"- Target `{way}` at least 50% of raw COPY: {share:.0f}%, {verdict}.")
        parts.append("")
    prune = select(rows, "prune")
    parts += ["## 10. Retention under load", "", run_note(prune), ""]
    parts += [
        "A claimer claims and finishes one job at a time from a backlog while `Queue.prune` deletes the "
        "finished rows a month old, in batches (each its own transaction, timed from the client: "
        "a batch's time is its whole transaction). `0002 prune` is the first migration's unordered batches on "
        "a second set of rows. `churned claim index` and `after REINDEX CONCURRENTLY`: the claim again after "
        "all those claims emptied the head of the claim index, and after rebuilding it.",
        "",
    ]
    if prune:
        t = pivot(prune)
        parts += [render_pivot(t, "phase", "finished rows"), ""]
        for s, x in t.keys:
            if s == "during prune_batch":
                longest = t.value(s, x, "longest batch transaction")
                ratio = t.value(s, x, "claim p99 vs no prune")
                parts.append(
                    f"- Target no prune transaction over 1 s ({int(x):,} rows): longest {fmt(str(longest), 's')} s, "
                    f"{_verdict(prune, longest <= 1.0)}."
                )
                parts.append(
                    f"- Target claim p99 during the prune within 2x of without: {ratio:.2f}x, "
                    f"{_verdict(prune, ratio <= 2.0)}."
                )
        parts.append("")
    return parts
