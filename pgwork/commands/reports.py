"""`pgwork stats`, `running`, `retrying` and `dead`: what the queue holds, as tables or JSON."""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Sequence
from typing import Any

from pgwork.commands.common import adder, open_queue, print_rows, whole
from pgwork.limits import describe
from pgwork.models import COUNTS, TypeStats
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
    print_rows(stats_rows(stats, as_json=args.json), args.json)
    return 0


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
            [dataclasses.asdict(r) for r in q.dead(limit=whole(args.limit, "--limit", "use 1..1000000") or 0)],
            args.json,
        )
    return 0


def register(sub: Any) -> None:
    add = adder(sub)
    for name, func, text in (
        ("stats", cmd_stats, "backlog per job type: ready, scheduled, running, dead, and its limit"),
        ("running", cmd_running, "jobs in flight: owner, lease left, heartbeat age, progress"),
        ("retrying", cmd_retrying, "pending jobs that have failed before"),
        ("dead", cmd_dead, "jobs that ran out of attempts, with their last error"),
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
