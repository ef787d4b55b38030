"""The Queue's maintenance: returning lapsed leases (reap), rotating the ready ring, a human's retry
and cancel, and pruning history. Split from pgwork.db.queue only to keep modules small; `Queue`
inherits it, so these stay `Queue.reap`, `Queue.prune` and so on.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta

from pgwork.db.base import QueueBase
from pgwork.db.connect import AnyConnection
from pgwork.db.params import cancel_ids, cancel_report
from pgwork.db.rows import CancelRow, IdRow, PruneBatchRow, Rotated
from pgwork.errors import InvalidArgument
from pgwork.models import CancelReport, PruneProgress, Reclaimed
from pgwork.validation import check_age, check_ids, check_int


class Maintenance(QueueBase):
    def reap(
        self, *, now: datetime | None = None, limit: int = 1000, conn: AnyConnection | None = None
    ) -> list[Reclaimed]:
        """Return running jobs whose lease lapsed to pending (dead once attempts are used up)."""
        check_int(limit, "limit", 1, 1_000_000, "reap in batches of at most 1000000")
        return self._many("reap", {"now": now, "limit": limit}, Reclaimed, conn)

    def rotate_ready(
        self, *, now: datetime | None = None, move_limit: int = 1_000, conn: AnyConnection | None = None
    ) -> list[Rotated]:
        """Truncate the ready ring's segments that hold no more than `move_limit` rows, after moving
        their live ones to the current segment; move `move_limit` rows of a larger one forward
        without locking it, and leave one of over ten times that (a backlog) to the claims
        (migrations 23, 25). Empty when another caller is rotating."""
        check_int(move_limit, "move_limit", 0, 1_000_000, "move at most 1000000 rows a rotation")
        return self._many("rotate_ready", {"now": now, "move_limit": move_limit}, Rotated, conn)

    def retry(
        self,
        ids: Sequence[int],
        *,
        max_attempts: int | None = None,
        now: datetime | None = None,
        conn: AnyConnection | None = None,
    ) -> list[int]:
        """Requeue dead or cancelled jobs now. Returns the ids requeued."""
        if max_attempts is not None:
            check_int(max_attempts, "max_attempts", 1, 32767, "use at least 1")
        params = {"ids": check_ids(ids), "max_attempts": max_attempts, "now": now}
        rows = self._many("retry", params, IdRow, conn)
        return sorted(r.id for r in rows)

    def cancel(
        self, ids: Sequence[int], *, now: datetime | None = None, conn: AnyConnection | None = None
    ) -> CancelReport:
        wanted = cancel_ids(ids)
        return cancel_report(wanted, self._many("cancel", {"ids": wanted, "now": now}, CancelRow, conn))

    def prune(
        self,
        older_than: timedelta,
        *,
        statuses: Sequence[str] = ("succeeded", "cancelled"),
        now: datetime | None = None,
        batch: int = 10_000,
        conn: AnyConnection | None = None,
        on_progress: Callable[[PruneProgress], None] | None = None,
    ) -> int:
        """Delete finished jobs completed before now - older_than, batch by batch, oldest first.

        Each batch is its own short transaction (so no prune holds a long lock, transaction or
        snapshot, and vacuum can reclaim behind it), resuming at the completed_at the last batch
        reached; `on_progress` hears of each. With `conn` the batches run in the caller's
        transaction instead, which the caller then holds for the whole prune."""
        seconds = check_age(older_than)
        allowed = ("succeeded", "cancelled", "dead")
        if not statuses or not set(statuses) <= set(allowed):
            raise InvalidArgument("statuses", f"must be among {list(allowed)}", "only history is pruned")
        check_int(batch, "batch", 1, 100_000, "prune in batches of at most 100000")
        total = 0
        for status in dict.fromkeys(statuses):
            after: datetime | None = None
            while True:
                params = {"status": status, "older_than": seconds, "batch": batch, "after": after, "now": now}
                started = time.monotonic()
                row = self._one("prune_batch", params, PruneBatchRow, conn)
                deleted = row.deleted if row is not None else 0
                total += deleted
                if on_progress is not None:
                    on_progress(PruneProgress(status, deleted, total, time.monotonic() - started))
                if deleted < batch or row is None:
                    break
                after = row.through
        return total
