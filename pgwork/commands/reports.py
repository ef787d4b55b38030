"""`pgwork stats`, `running`, `retrying` and `dead`: what the queue holds, as tables or JSON."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from pgwork.commands.common import adder, bounded, open_queue, print_rows
from pgwork.commands.jobs import TAKEN_WITHIN
from pgwork.durations import format_duration
from pgwork.limits import describe
from pgwork.models import COUNTS, TypeStats
from pgwork.tables import visible
from pgwork.validation import parse_job_types

# `pgwork stats` counts up to this many jobs per type and status unless --exact: enough to read
# a backlog, and the reading costs the same at ten million jobs.
STATS_CAP = 1000


def stats_rows(stats: Sequence[TypeStats], *, as_json: bool) -> list[dict[str, Any]]:
    """`pgwork stats` rows (pure). A count that reached the cap shows as `>=N` in the table; in
    JSON the counts stay numbers and `lower_bounds` names the ones that are "at least"."""
    rows = []
    for s in stats:
        row = dataclasses.asdict(s)
        cap = row.pop("cap")
        capped = s.lower_bounds()
        if as_json:
            row["lower_bounds"] = list(capped)
            row["cap"] = cap
        else:
            for name in COUNTS:
                if name in capped:
                    row[name] = f">={row[name]}"
            row["limit"] = describe(row.pop("max_running"), row.pop("rate_count"), row.pop("rate_seconds"))
        rows.append(row)
    return rows


def cmd_stats(args: argparse.Namespace) -> int:
    job_types = parse_job_types(args.job_types)
    with open_queue(args) as q:
        stats = q.stats(job_types, cap=None if args.exact else STATS_CAP)
        taken = q.recently_taken([s.job_type for s in stats if s.ready > 0], within=TAKEN_WITHIN)
        autovacuum = q.autovacuum_on()
        parents = q.waiting(cap=None if args.exact else STATS_CAP)
    print_rows(stats_rows(stats, as_json=args.json), args.json)
    for note in stats_notes(stats, taken, autovacuum=autovacuum, waiting=parents):
        print(f"pgwork stats: note: {note}", file=sys.stderr)
    return 0


def stats_notes(
    stats: Sequence[TypeStats],
    taken: Mapping[str, object],
    *,
    autovacuum: bool,
    waiting: Mapping[str, int] | None = None,
) -> list[str]:
    """What `pgwork stats` adds below its table (pure): types whose ready jobs no worker took
    lately, autovacuum being off for the jobs table, and jobs waiting for parents (not backlog)."""
    notes = []
    if waiting:
        shown = ", ".join(f"{visible(t)} {n}" for t, n in sorted(waiting.items()))
        notes.append(f"waiting for their parents (not in the backlog until those succeed): {shown}")
    untaken = [s for s in stats if s.ready > 0 and taken.get(s.job_type) is None]
    if untaken:
        names = ", ".join(f"{visible(s.job_type)} ({s.ready} ready)" for s in untaken)
        notes.append(
            f"no worker has taken a job of {names} in the last {format_duration(TAKEN_WITHIN)}: is a worker running "
            "with these types (pgwork worker APP --job-types ..., or a JobQueue's spec.jobTypes)?"
        )
    if not autovacuum:
        notes.append(
            "autovacuum is off for pgwork.jobs (server setting `autovacuum` or the table's autovacuum_enabled): "
            "dead rows will pile up in the claim index and slow every claim; turn it on, or VACUUM pgwork.jobs "
            "on a schedule"
        )
    return notes


def cmd_running(args: argparse.Namespace) -> int:
    with open_queue(args) as q:
        print_rows([dataclasses.asdict(r) for r in q.running()], args.json)
    return 0


def cmd_retrying(args: argparse.Namespace) -> int:
    with open_queue(args) as q:
        print_rows([dataclasses.asdict(r) for r in q.retrying()], args.json)
    return 0


def cmd_dead(args: argparse.Namespace) -> int:
    with open_queue(args) as q:
        print_rows(
            [dataclasses.asdict(r) for r in q.dead(limit=bounded(args.limit, "--limit", 1, 1_000_000, 100))],
            args.json,
        )
    return 0


def cmd_schedules(args: argparse.Namespace) -> int:
    with open_queue(args) as q:
        print_rows([dataclasses.asdict(r) for r in q.schedules()], args.json)
    return 0


def register(sub: Any) -> None:
    add = adder(sub)
    for name, func, text in (
        ("stats", cmd_stats, "backlog per job type: ready, scheduled, running, dead, and its limit"),
        ("running", cmd_running, "jobs in flight: owner, lease left, heartbeat age, progress"),
        ("retrying", cmd_retrying, "pending jobs that have failed before"),
        ("dead", cmd_dead, "jobs that ran out of attempts, with their last error"),
        ("schedules", cmd_schedules, "periodic jobs: cron, time zone, last tick (and its job), next tick, skipped"),
    ):
        p = add(name, func, text)
        p.add_argument("--json", action="store_true", help="print JSON")
        if name == "stats":
            p.add_argument(
                "--job-types", nargs="+", metavar="A,B", help="only these types, each shown even with no job (a,b,c)"
            )
            p.add_argument(
                "--exact",
                action="store_true",
                help=f"count every job (reads one index entry per job); by default counts stop at {STATS_CAP} "
                f"and show as >={STATS_CAP}",
            )
        if name == "dead":
            p.add_argument("--limit", default="100", help="show at most this many (default 100)")
