"""docs/benchmarks.md section 17: the claim under a held vacuum horizon (experiment `mvcc`, issue 23). Pure."""

from __future__ import annotations

from collections.abc import Sequence

from pgwork.tools.lab.pivot import pivot, render_pivot, run_note, select
from pgwork.tools.lab.results import Row

NAME = "mvcc"


def render(rows: Sequence[Row]) -> list[str]:
    mine = select(rows, NAME)
    parts = [
        "## 17. The claim while a snapshot holds back vacuum",
        "",
        run_note(mine),
        "",
        "pgwork, pgqueuer (asyncpg, its default driver) and the reference design side by side, all three at "
        "once on one database, each offered the same fixed rate by its own producer: pgwork drained by real "
        "`pgwork worker` processes with a probe claiming beside them (its claims timed), pgqueuer by its "
        "QueueManager (every dequeue timed in place), the reference design by two bare SKIP LOCKED loops on "
        "the write-up's table. After a warm-up a snapshot is held: case (a) a REPEATABLE READ transaction "
        "that read the jobs tables, (b) one that read only another table, (c) nobody; then released. "
        "Per bucket of the hold: claim p50/p99 (ms), backlog and dead tuples at the bucket's end. "
        "`recovery`: seconds from the release to the first 5 s window with p50 within 1.25x of the warm-up "
        "and a backlog under one second of offered work (blank: not within the run). Durations and rate: "
        "`PGWORK_LAB_MVCC` (see `pgwork/tools/lab/mvcc.py`); a run on a small host uses a short form, "
        "named in its summary's `offered`.",
        "",
    ]
    if not mine:
        return parts
    summary = [r for r in mine if r.x == "summary"]
    buckets = [r for r in mine if r.x != "summary"]
    parts += [render_pivot(pivot(summary), "system, case", "", skip=()), ""]
    parts += [render_pivot(pivot(buckets), "system, case", "held for"), ""]
    return parts
