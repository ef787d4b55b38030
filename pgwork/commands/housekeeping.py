"""`pgwork reap` and `pgwork prune`: what the reaper CronJob and retention run."""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from pgwork.commands.common import UsageError, adder, bounded, open_queue, seconds
from pgwork.durations import parse_age
from pgwork.models import PruneProgress, Reclaimed
from pgwork.reaper import Reaper, ReaperConfig
from pgwork.tables import visible


def _print_reclaimed(r: Reclaimed) -> None:
    print(
        f"reclaimed job {r.id} ({visible(r.job_type)}) from {visible(r.previous_owner)}, "
        f"{r.overdue_seconds:.1f}s overdue, attempt {r.attempt_count} -> {r.status}",
        flush=True,
    )


def cmd_reap(args: argparse.Namespace) -> int:
    loop_for = seconds(args.loop_for, "--loop-for")
    every = seconds(args.every, "--every")
    if every <= 0:
        raise UsageError("--every: must be > 0 seconds, e.g. 10s")
    with Reaper(
        lambda: open_queue(args), ReaperConfig(every=every, loop_for=loop_for), on_reclaimed=_print_reclaimed
    ) as r:
        r.loop()
    return 0


def prune_statuses(status: Sequence[str] | None, include_dead: bool) -> list[str]:
    """Which statuses `pgwork prune` deletes. Dead jobs are the ones someone still has to look
    at (their last_error is the only record of what went wrong), so only an explicit
    --include-dead deletes them."""
    chosen = list(dict.fromkeys(status or ["succeeded", "cancelled", *(["dead"] if include_dead else [])]))
    if "dead" in chosen and not include_dead:
        raise UsageError(
            "--status dead: pruning deletes dead jobs and their last_error for good; add --include-dead to mean it"
        )
    return chosen


def cmd_prune(args: argparse.Namespace) -> int:
    try:
        age = parse_age(args.older_than, "--older-than")
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    statuses = prune_statuses(args.status, args.include_dead)
    batch = bounded(args.batch_size, "--batch-size", 1, 100_000, 10_000)
    longest = 0.0
    shown_at = time.monotonic()

    def progress(p: PruneProgress) -> None:
        # One line a second at most: a CronJob's log shows the prune moving without a line per batch.
        nonlocal longest, shown_at
        longest = max(longest, p.seconds)
        if time.monotonic() - shown_at >= 1.0:
            shown_at = time.monotonic()
            print(f"pruning: {p.total} deleted so far ({p.status}), longest batch {longest:.2f}s", flush=True)

    with open_queue(args) as q:
        deleted = q.prune(timedelta(seconds=age), statuses=statuses, batch=batch, on_progress=progress)
    print(
        f"deleted {deleted} {'/'.join(statuses)} jobs older than {visible(args.older_than.strip())} "
        f"(batches of {batch}, longest {longest:.2f}s)"
    )
    return 0


def register(sub: Any) -> None:
    add = adder(sub)
    p = add("reap", cmd_reap, "return jobs whose lease expired to pending (what the reaper CronJob runs)")
    p.add_argument("--loop-for", default="0", help="keep reaping for this long, for finer than a minute")
    p.add_argument("--every", default="10s", help="pause between rounds when looping")
    p = add("prune", cmd_prune, "delete succeeded and cancelled history older than an age")
    p.add_argument("--older-than", required=True, help="age with a unit, such as 30d, 12h (a bare number is refused)")
    p.add_argument(
        "--status",
        action="append",
        choices=["succeeded", "cancelled", "dead"],
        help="only these statuses (repeatable; default succeeded and cancelled)",
    )
    p.add_argument(
        "--include-dead", action="store_true", help="also delete dead jobs and their last_error (never by default)"
    )
    p.add_argument("--batch-size", help="rows per transaction, each batch committed on its own (default 10000)")
