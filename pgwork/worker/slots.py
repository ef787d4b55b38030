"""How many jobs to claim now, and whether an empty claim means done (pure, no I/O)."""

from __future__ import annotations

from collections.abc import Iterable

from pgwork.models import TypeStats


def claim_size(concurrency: int, batch: int, *, waiting: int, running: int, finishing: int = 0) -> int:
    """Jobs to claim in the next statement: none while the runners still have at least one job
    each queued (claiming more would only hold leases idle), else enough to fill the worker's
    capacity of max(concurrency, batch) jobs waiting or running, and never more than `batch` at
    once. Jobs whose outcome waits to be written (`finishing`) free their runner at once, but
    back-pressure holds: with more than one capacity of them pending, claiming waits for the
    writes, so a writer that falls behind never lets the worker hoard leases."""
    if waiting >= concurrency:
        return 0
    capacity = max(concurrency, batch)
    room = min(capacity - waiting - running, 2 * capacity - waiting - running - finishing)
    return max(0, min(batch, room))


def held_back(stats: Iterable[TypeStats]) -> bool:
    """Whether ready jobs of these types wait on a fleet-wide limit (other workers hold the type's
    slots, or its rate is spent): then a burst worker whose claim came back empty waits for them
    instead of exiting with the backlog undrained (pure)."""
    return any(s.ready > 0 and (s.max_running is not None or s.rate_count is not None) for s in stats)
