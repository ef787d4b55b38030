"""What a handler module sees: `@handler("TYPE")`, the `Job` it receives, and `PermanentError`.

A handler is a plain function `Job -> JSON value`. It runs on its own thread with no database
transaction open; the worker writes its result through the fenced succeed, never the handler.
"""

from __future__ import annotations

import enum
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pgwork.validation import check_job_type

HandlerFunc = Callable[["Job"], Any]


class PermanentError(Exception):
    """Raise from a handler when retrying cannot help (bad input): the job goes dead at once."""


# Shown in last_error and error.type as users import it: pgwork.PermanentError.
PermanentError.__module__ = "pgwork"


class StopReason(enum.Enum):
    LEASE_LOST = "lease_lost"  # a renewal matched no row: another worker may hold the job now
    CANCELLED = "cancelled"  # someone ran `pgwork cancel` on the running job
    SHUTDOWN = "shutdown"  # the drain grace ran out; the job was released back to pending


@dataclass
class Job:
    """One claimed attempt of a job, as handed to a handler.

    Long handlers should look at `should_stop` (or use `sleep`, which wakes early) between
    steps: once it is true, whatever the handler returns is discarded and no effect is written.
    """

    id: int
    job_type: str
    payload: dict[str, Any]
    attempt: int
    max_attempts: int
    idempotency_key: str
    trace_context: dict[str, str] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event, repr=False)
    _reason: StopReason | None = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def stop_reason(self) -> StopReason | None:
        return self._reason

    @property
    def should_stop(self) -> bool:
        return self._stop.is_set()

    @property
    def lease_lost(self) -> bool:
        return self._reason is StopReason.LEASE_LOST

    @property
    def cancelled(self) -> bool:
        return self._reason is StopReason.CANCELLED

    def sleep(self, seconds: float) -> bool:
        """Wait `seconds`; returns False early if the job must stop (lost, cancelled, released)."""
        return not self._stop.wait(max(0.0, seconds))

    def request_stop(self, reason: StopReason) -> None:
        """Called by the worker; the first reason wins."""
        with self._lock:
            if self._reason is None:
                self._reason = reason
        self._stop.set()


class Registry:
    """Handlers by job type."""

    def __init__(self) -> None:
        self._handlers: dict[str, HandlerFunc] = {}

    def register(self, job_type: str, func: HandlerFunc) -> HandlerFunc:
        check_job_type(job_type)
        existing = self._handlers.get(job_type)
        if existing is not None and existing is not func:
            raise ValueError(
                f"job type {job_type!r} already has a handler ({_name(existing)}); register one handler per type"
            )
        self._handlers[job_type] = func
        return func

    def get(self, job_type: str) -> HandlerFunc | None:
        return self._handlers.get(job_type)

    def job_types(self) -> list[str]:
        return sorted(self._handlers)

    def snapshot(self) -> dict[str, HandlerFunc]:
        return dict(self._handlers)

    def registered_by(self, module: str, before: dict[str, HandlerFunc]) -> Registry:
        """The handlers `module` brought: those registered since `before` was taken (while it was
        imported, with whatever it imports), plus those defined in `module` or its submodules (it
        may have been imported earlier). Nothing else: a worker must never take the job types of
        a module it was not asked to run (pgwork's own lab and chaos apps among them)."""
        chosen = Registry()
        for job_type, func in self._handlers.items():
            defined_in = getattr(func, "__module__", None) or ""
            new = before.get(job_type) is not func
            if new or defined_in == module or defined_in.startswith(module + "."):
                chosen.register(job_type, func)
        return chosen

    def clear(self) -> None:
        self._handlers.clear()


# The registry `@pgwork.handler` fills when `pgwork worker --app MODULE` imports the module.
REGISTRY = Registry()


def handler(job_type: str) -> Callable[[HandlerFunc], HandlerFunc]:
    """Register the decorated function as the handler for `job_type`."""

    def decorate(func: HandlerFunc) -> HandlerFunc:
        return REGISTRY.register(job_type, func)

    return decorate


def _name(func: HandlerFunc) -> str:
    return f"{getattr(func, '__module__', '?')}.{getattr(func, '__qualname__', repr(func))}"
