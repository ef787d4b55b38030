"""One way to wait in a test: poll a condition until it holds, never a bare sleep."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

# A bound, not a duration: a wait returns as soon as its condition holds, so a generous deadline
# costs nothing when things work and keeps a 2-core CI machine at load 40+ from failing a
# correct test (15 s was seen running out while the operator's timers queued behind the load).
CONDITION_TIMEOUT = 60.0


def wait_for(
    check: Callable[[], T | None],
    timeout: float = CONDITION_TIMEOUT,
    *,
    interval: float = 0.05,
    what: str = "",
    tolerate: tuple[type[BaseException], ...] = (),
) -> T:
    """Poll `check` until it returns something truthy and return that; fail after `timeout`.

    Exceptions listed in `tolerate` count as "not yet" (an object not created yet, a server still
    starting); the last value or exception is in the failure message, so a timeout says what was seen.
    """
    deadline = time.monotonic() + timeout
    last: object = None
    while True:
        try:
            value = check()
        except tolerate as exc:
            last = exc
        else:
            if value:
                return value
            last = value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what or check}: last {last!r}")
        time.sleep(interval)


def stays(check: Callable[[], object], *, duration: float, interval: float = 0.05, what: str = "") -> None:
    """Assert that `check` stays truthy for the whole of `duration` (a thing that must NOT happen)."""
    deadline = time.monotonic() + duration
    while True:
        if not check():
            raise AssertionError(f"{what or check} stopped holding before {duration}s")
        if time.monotonic() >= deadline:
            return
        time.sleep(interval)
