"""docs/benchmarks.md section 17: the claim under a held vacuum horizon (experiment `mvcc`, issue 23). Pure."""

from __future__ import annotations

from collections.abc import Sequence

from pgwork.tools.lab.pivot import pivot, render_pivot, run_note, select
from pgwork.tools.lab.results import Row

NAME = "mvcc"


def split(rows: Sequence[Row]) -> tuple[list[Row], list[Row]]:
    """The newest run with the peers beside pgwork, and the newest run of pgwork alone (`solo=1`:
    no peer's series in it), each the full run if there is one (pure)."""
    by_run: dict[str, list[Row]] = {}
    for r in rows:
        if r.experiment == NAME:
            by_run.setdefault(r.run, []).append(r)
    alone = {run for run, rs in by_run.items() if all(r.series.startswith("pgwork,") for r in rs)}
    together = [r for r in rows if r.experiment == NAME and r.run not in alone]
    return select(together, NAME), select([r for r in rows if r.run in alone], NAME)


def _tables(rows: Sequence[Row]) -> list[str]:
    summary = [r for r in rows if r.x == "summary"]
    buckets = [r for r in rows if r.x != "summary"]
    return [
        render_pivot(pivot(summary), "system, case", "", skip=()),
        "",
        render_pivot(pivot(buckets), "system, case", "held for"),
        "",
    ]


def render(rows: Sequence[Row]) -> list[str]:
    mine, alone = split(rows)
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
    if mine:
        parts += _tables(mine)
    if alone:
        parts += [
            "### pgwork alone",
            "",
            run_note(alone),
            "",
            "The same experiment with `solo=1`: pgwork's workers, producer and probe only, no peer on the "
            "host. `autovacuums`: runs on pgwork's tables in the bucket (pg_stat_user_tables).",
            "",
            *_tables(alone),
        ]
    return parts + READING if mine or alone else parts


# What the recorded runs show, written by whoever ran them (the CSV holds the figures, not the
# machine's state): keep it true when the run is replaced.
READING = [
    "_Reading pgwork alone (embedded PostgreSQL 18.6, autovacuum on, hold 600 s, one-minute buckets)._ The "
    "table above is run 20261205T035639Z at the issue's example rate, 500 jobs/s (`rate=500,solo=1,cases=bc`; "
    "nothing else on the host). pgwork's claim p50 per minute, (b): 3.15/2.52/2.33/2.37/2.53/2.31/2.38/2.45/"
    "2.43/2.42 ms; (c): 2.10/2.02/2.01/2.08/2.07/2.03/2.12/2.13/2.15/2.10 ms. At 10 minutes (b) is **1.15x** "
    "(c) (2.42 against 2.10 ms): the issue's 1.5x holds; the first minute's 1.50x came with a backlog of "
    "1,093 jobs left from the warm-up, and every later minute stayed within 1.12-1.25x. p99 at 10 minutes "
    "7.03 against 4.31 ms. Dead tuples on pgwork's tables reached 610,000 in (b) against a steady "
    "48,000-54,000 in (c): the held snapshot keeps every finished job's old versions, and the claim does not "
    "walk them (the ring's segments are truncated; the jobs table is read by primary key). Autovacuum ran "
    "2-4 times a minute in both cases: under the hold it removes nothing and runs no more often. Run "
    "20261205T032329Z (the CSV; 150 jobs/s, the rate of the side-by-side runs; one engineer's worker "
    "benchmarks, seconds each, about one a minute during its case (b)): (b) 2.63/2.01/2.23/2.18/3.05/2.44/"
    "2.85/2.29/2.19/2.10 ms, (c) 2.16/2.08/1.98/2.18/1.99/2.15/2.25/2.23/2.25/2.22 ms, **0.95x** at 10 "
    "minutes, 183,000 dead tuples against ~16,000. So the 2.4x of the side-by-side run above is not pgwork's "
    "own: there the reference design's claims (17.8 ms at 10 minutes) and pgqueuer's (24.5 ms), each walking "
    "its dead index entries at 150 claims a second, took the host's two cores, and every process, pgwork's "
    "included, waited for CPU (a host with cores to spare should bring the side-by-side figures closer to "
    "these; not measured here).",
    "",
    "_Reading the side-by-side runs of 2026-12-05 (10-minute form at 150 jobs/s per system, 450 in all: "
    "warm-up 30 s, hold 600 s, 30 s after, one-minute buckets; embedded PostgreSQL 18.6, autovacuum on; load "
    "average 1-8, other sessions' work beside)._ The first table is run 20261205T014259Z, cases (c) and (b), "
    "after the ring's rotation was fixed to follow the segment boundaries (workers used to rotate only after a "
    "heartbeat that found a job held: about once a minute for fast jobs). pgwork's claim p50 per minute, (c): "
    "2.05/2.06/1.83/1.75/1.97/1.86/1.98/2.07/2.15/2.11 ms; (b): 2.63/2.11/2.41/3.68/4.18/4.47/4.09/4.02/"
    "4.68/5.14 ms, 2.4x (c) at 10 minutes, creeping up by about 0.3 ms a minute in the second half while "
    "the peers slowed far more: the reference design's loop went 0.76 to 17.8 ms and pgqueuer's dequeue "
    "1.54 to 24.5 ms (in (c) both flat: 0.28-0.32 and 0.81-1.14 ms). Run 20261205T001509Z (the CSV, before the "
    "rotation fix; all three cases; load 2-8): "
    "pgwork (c) 2.96/2.35/2.75/2.27/4.00/4.76/2.79/1.93/2.63/3.19 ms, (b) 3.15/5.13/6.30/6.55/6.57/7.68/"
    "7.40/6.16/4.71/5.52 ms, (a) 2.67/4.49/3.30/4.33/4.62/4.62/5.17/5.29/4.94/4.72 ms; the reference (b) "
    "0.78 to 11.4 ms, (a) 0.66 to 12.1 ms; pgqueuer (b) 1.82 to 23.4 ms (36.0 at 7 minutes), (a) 1.37 to "
    "17.3 ms; pgwork's backlog stayed under 600 jobs throughout, its jobs table reached ~183,000 dead "
    "tuples in (a) and (b) alike. A 5-minute run after the fix (20261205T010545Z, (c) and (b)) read (b) "
    "3.65 ms against (c) 3.49 at its last minute. Case (a) behaves as (b) for the claim (a reader of "
    "`pgwork.jobs` holds no lock on the ring). The earlier short form (2026-12-04, 100 jobs/s, hold 150 s) "
    "compared the one-table layout with the ring at load 8-15 and could not separate them by time; the "
    "buffers could (docs/architecture.md, Storage under a held vacuum horizon).",
    "",
]
