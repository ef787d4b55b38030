"""The Queue's history: finished jobs archived into pgwork.job_history (one partition per UTC
day, migration 27), and retention by dropping whole days. Split from pgwork.db.queue only to keep
modules small."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime, timedelta

from pgwork.db.base import QueueBase
from pgwork.db.connect import AnyConnection
from pgwork.db.rows import ArchiveBatchRow
from pgwork.errors import InvalidArgument
from pgwork.quoting import quoted
from pgwork.validation import check_age, check_int


@dataclass(frozen=True)
class ArchiveProgress:
    """One committed archive batch: jobs moved by it and so far, and how long its transaction took."""

    moved: int
    total: int
    seconds: float


@dataclass(frozen=True)
class DroppedDay:
    """One day partition of pgwork.job_history that drop_history reached: 'dropped', or 'busy'
    (a reader held it past the 100 ms lock wait; the next call drops it). rows_estimate is the
    planner's (None when the partition was never analysed); bytes is its size with its index."""

    partition_name: str
    day: date
    rows_estimate: int | None
    bytes: int
    outcome: str


class History(QueueBase):
    def archive(
        self,
        older_than: timedelta,
        *,
        batch: int = 10_000,
        max_batches: int | None = None,
        now: datetime | None = None,
        conn: AnyConnection | None = None,
        on_progress: Callable[[ArchiveProgress], None] | None = None,
    ) -> int:
        """Move succeeded and cancelled jobs completed before now - older_than into
        pgwork.job_history, oldest first, batch by batch; returns how many moved.

        Dead jobs stay (retry acts on them). A job with a relative that is not finished (or is dead,
        or cancelled too recently) stays with its edges until its family has finished. Each batch
        is its own short transaction, as `prune`'s are; with `conn` they run in the caller's.
        `max_batches` stops after that many (the reaper's bounded share of a round)."""
        seconds = check_age(older_than)
        check_int(batch, "batch", 1, 100_000, "archive in batches of at most 100000")
        if max_batches is not None:
            check_int(max_batches, "max_batches", 1, 1_000_000, "use at least 1, or None for no bound")
        total = 0
        batches = 0
        after: datetime | None = None
        while True:
            params = {"older_than": seconds, "batch": batch, "after": after, "now": now}
            started = time.monotonic()
            row = self._one("archive_batch", params, ArchiveBatchRow, conn)
            moved = row.moved if row is not None else 0
            total += moved
            if on_progress is not None:
                on_progress(ArchiveProgress(moved, total, time.monotonic() - started))
            batches += 1
            if row is None or moved < batch or (max_batches is not None and batches >= max_batches):
                return total
            after = row.through

    def drop_history(
        self, before: date, *, now: datetime | None = None, conn: AnyConnection | None = None
    ) -> list[DroppedDay]:
        """Detach and drop every day partition of pgwork.job_history whose whole UTC day lies before
        `before` (today at the latest: the day archiving writes is never dropped). A catalog change
        and the files unlinked, no row visited. Returns the days reached, oldest first."""
        if isinstance(before, datetime) or not isinstance(before, date):
            raise InvalidArgument("before", f"must be a date, got {quoted(before)}", "e.g. date(2026, 11, 5)")
        return self._many("drop_history", {"before": before, "now": now}, DroppedDay, conn)
