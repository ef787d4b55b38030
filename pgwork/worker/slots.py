"""How many jobs to claim now (pure, no I/O)."""

from __future__ import annotations


def claim_size(concurrency: int, batch: int, *, waiting: int, running: int) -> int:
    """Jobs to claim in the next statement: none while the runners still have at least one job
    each queued (claiming more would only hold leases idle), else enough to fill the worker's
    capacity of max(concurrency, batch) held jobs, and never more than `batch` at once.
    Jobs whose outcome is being written do not count: their runner is already free."""
    if waiting >= concurrency:
        return 0
    room = max(concurrency, batch) - waiting - running
    return max(0, min(batch, room))
