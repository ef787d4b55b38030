"""Which part of the timer's status is written: a table of current status, new status and time."""

from __future__ import annotations

from typing import Any

import pytest

from pgwork.operator.conditions import timestamp
from pgwork.operator.controller import status_to_write

T0 = 1_800_000_000.0
CONDITIONS = [{"type": "Scaling", "status": "True", "reason": "Steady", "message": "1 replicas"}]


def status(at: float, **fields: Any) -> dict[str, Any]:
    return {"pending": 0, "replicas": 1, "conditions": CONDITIONS, "lastPollTime": timestamp(at), **fields}


@pytest.mark.parametrize(
    ("current", "new", "now", "expected"),
    [
        # Nothing new within the refresh period: no write at all.
        (status(T0), status(T0 + 5), T0 + 5, {}),
        # Nothing new, but the last write is a refresh period old: only lastPollTime.
        (status(T0), status(T0 + 60), T0 + 60, {"lastPollTime": timestamp(T0 + 60)}),
        # A figure changed: everything.
        (status(T0), status(T0 + 1, pending=3), T0 + 1, status(T0 + 1, pending=3)),
        # A condition changed: everything.
        (
            status(T0),
            status(T0 + 1, conditions=[{**CONDITIONS[0], "message": "2 replicas"}]),
            T0 + 1,
            status(T0 + 1, conditions=[{**CONDITIONS[0], "message": "2 replicas"}]),
        ),
        # A field the status lacks so far: everything.
        (status(T0), status(T0 + 1, dead=0), T0 + 1, status(T0 + 1, dead=0)),
        # No status yet (a new JobQueue): everything.
        (None, status(T0), T0, status(T0)),
        # An unreadable lastPollTime is rewritten.
        ({**status(T0), "lastPollTime": "yesterday"}, status(T0 + 1), T0 + 1, {"lastPollTime": timestamp(T0 + 1)}),
        # A new status without lastPollTime that says nothing new: nothing.
        ({"conditions": CONDITIONS}, {"conditions": CONDITIONS}, T0, {}),
    ],
    ids=["unchanged", "refresh", "figure", "condition", "new field", "no status", "bad time", "no poll time"],
)
def test_status_to_write(
    current: dict[str, Any] | None, new: dict[str, Any], now: float, expected: dict[str, Any]
) -> None:
    assert status_to_write(current, new, now, refresh_seconds=60.0) == expected
