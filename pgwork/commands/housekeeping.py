"""`pgwork reap`, `pgwork prune`, `pgwork archive` and `pgwork drop-history`: what the reaper
CronJob and retention run."""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from datetime import UTC, date, datetime, timedelta
from typing import Any

from pgwork.commands.common import UsageError, adder, age_seconds, bounded, open_queue, seconds
from pgwork.db.history import ArchiveProgress
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
    archive_after = None if args.archive_after is None else age_seconds(args.archive_after, "--archive-after")
    config = ReaperConfig(every=every, loop_for=loop_for, archive_after=archive_after)
    with Reaper(lambda: open_queue(args), config, on_reclaimed=_print_reclaimed) as r:
        r.loop()
    if r.archived:
        print(f"archived {r.archived} finished jobs to pgwork.job_history", flush=True)
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
    age = age_seconds(args.older_than, "--older-than")
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


def cmd_archive(args: argparse.Namespace) -> int:
    age = age_seconds(args.older_than, "--older-than")
    batch = bounded(args.batch_size, "--batch-size", 1, 100_000, 10_000)
    longest = 0.0

    def progress(p: ArchiveProgress) -> None:
        nonlocal longest
        longest = max(longest, p.seconds)

    with open_queue(args) as q:
        moved = q.archive(timedelta(seconds=age), batch=batch, on_progress=progress)
    print(
        f"archived {moved} succeeded/cancelled jobs older than {visible(args.older_than.strip())} "
        f"to pgwork.job_history (batches of {batch}, longest {longest:.2f}s)"
    )
    return 0


def history_cutoff(before: str | None, older_than: str | None, now: datetime) -> date:
    """The first UTC day drop-history keeps: --before as given, or the day of now - --older-than
    (every day dropped ended at least that long ago). Exactly one of the two (pure)."""
    if (before is None) == (older_than is None):
        raise UsageError("give exactly one of --before DATE (e.g. 2026-11-05) or --older-than AGE (e.g. 30d)")
    today = now.astimezone(UTC).date()
    if older_than is not None:
        return (now - timedelta(seconds=age_seconds(older_than, "--older-than"))).astimezone(UTC).date()
    assert before is not None
    try:
        day = date.fromisoformat(before.strip())
    except ValueError:
        raise UsageError(f"--before: {visible(before)} is not a date; write it as YYYY-MM-DD") from None
    if day > today:
        raise UsageError(f"--before: {day} is after today ({today}, UTC); today's history is never dropped")
    return day


def cmd_drop_history(args: argparse.Namespace) -> int:
    before = history_cutoff(args.before, args.older_than, datetime.now(UTC))
    with open_queue(args) as q:
        days = q.drop_history(before)
    for d in days:
        rows = "rows unknown (never analysed)" if d.rows_estimate is None else f"~{d.rows_estimate} rows"
        print(f"{d.outcome} {d.partition_name} ({d.day}, {rows}, {d.bytes} bytes)")
    dropped = sum(1 for d in days if d.outcome == "dropped")
    busy = len(days) - dropped
    print(
        f"dropped {dropped} day(s) of history before {before}"
        + (f"; {busy} busy, tried again next run" if busy else "")
    )
    return 0


def register(sub: Any) -> None:
    add = adder(sub)
    p = add("reap", cmd_reap, "return jobs whose lease expired to pending (what the reaper CronJob runs)")
    p.add_argument("--loop-for", default="0", help="keep reaping for this long, for finer than a minute")
    p.add_argument("--every", default="10s", help="pause between rounds when looping")
    p.add_argument(
        "--archive-after",
        help="also move succeeded and cancelled jobs older than this age (e.g. 1d) into pgwork.job_history "
        "each round, 100000 at most a round (default: never)",
    )
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
    p = add(
        "archive",
        cmd_archive,
        "move succeeded and cancelled jobs older than an age into pgwork.job_history (dead jobs stay)",
    )
    p.add_argument("--older-than", required=True, help="age with a unit, such as 7d, 12h (a bare number is refused)")
    p.add_argument("--batch-size", help="rows per transaction, each batch committed on its own (default 10000)")
    p = add("drop-history", cmd_drop_history, "drop whole UTC days of archived history (pgwork.job_history)")
    p.add_argument("--before", help="drop the days before this date, YYYY-MM-DD (today at the latest)")
    p.add_argument("--older-than", help="or: drop the days that ended more than this age ago, such as 30d")
