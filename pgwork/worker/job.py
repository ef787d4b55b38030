"""The `Job` a handler receives (stop requests, progress, checkpoints), `PermanentError`, and
`current_job()` for code below a handler that was not handed its Job."""

from __future__ import annotations

import contextvars
import enum
import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pgwork.durations import MAX_SECONDS
from pgwork.progress import Progress, check_progress, checkpoint_json


class PermanentError(Exception):
    """Raise from a handler when retrying cannot help (bad input): the job goes dead at once."""


# Shown in last_error and error.type as users import it: pgwork.PermanentError.
PermanentError.__module__ = "pgwork"


class StopReason(enum.Enum):
    LEASE_LOST = "lease_lost"  # a renewal matched no row: another worker may hold the job now
    CANCELLED = "cancelled"  # someone ran `pgwork cancel` on the running job
    SHUTDOWN = "shutdown"  # the drain grace ran out; the job was released back to pending
    TIMED_OUT = "timed_out"  # the job's hard timeout passed (pgwork.worker.watchdog)


@dataclass
class Job:
    """One claimed attempt of a job, as handed to a handler.

    Long handlers should look at `should_stop` (or use `sleep`, which wakes early) between
    steps: once it is true, whatever the handler returns is discarded and no effect is written.
    They may report `progress` and save a `checkpoint` to resume from (`last_checkpoint`).
    """

    id: int
    job_type: str
    payload: dict[str, Any]
    attempt: int
    max_attempts: int
    idempotency_key: str
    trace_context: dict[str, str] = field(default_factory=dict)
    # What the job's last checkpoint saved (this attempt's or an earlier one's), or None.
    last_checkpoint: Any = None
    # Made by the first `sleep` (or a stop request after it), under `_lock`: most jobs never
    # sleep, and an Event costs more to make than the rest of a Job (its Condition).
    _stop: threading.Event | None = field(default=None, repr=False)
    _reason: StopReason | None = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _on_stop: list[Callable[[], None]] = field(default_factory=list, repr=False)
    _reported: Progress | None = field(default=None, repr=False)  # the newest progress
    _unsent: Progress | None = field(default=None, repr=False)  # ... not yet given to a heartbeat
    # Saves a checkpoint, fenced by this attempt's lease (set by the worker); False: the lease
    # is lost. None: a Job made by hand, e.g. in a handler's unit test, whose checkpoints stay
    # in memory (a test may pass its own to play a lost lease).
    saver: Callable[[Any], bool] | None = field(default=None, repr=False)
    # Reads the job's parents as {id: (status, result)} (set by the worker, or by a child process
    # that asks the worker; None: a Job made by hand, whose parent_results raises).
    parent_reader: Callable[[], dict[int, tuple[str, Any]]] | None = field(default=None, repr=False)

    @property
    def stop_reason(self) -> StopReason | None:
        return self._reason

    @property
    def should_stop(self) -> bool:
        return self._reason is not None

    @property
    def lease_lost(self) -> bool:
        return self._reason is StopReason.LEASE_LOST

    @property
    def cancelled(self) -> bool:
        return self._reason is StopReason.CANCELLED

    @property
    def timed_out(self) -> bool:
        return self._reason is StopReason.TIMED_OUT

    def sleep(self, seconds: float) -> bool:
        """Wait `seconds`; returns False early if the job must stop (lost, cancelled, released)."""
        # Clamped before Event.wait converts it: wait(10**400) or wait(inf) raises OverflowError.
        seconds = min(max(0.0, seconds), MAX_SECONDS)
        with self._lock:
            if self._stop is None:
                self._stop = threading.Event()
                if self._reason is not None:
                    self._stop.set()
            stop = self._stop
        return not stop.wait(max(0.0, seconds))

    def progress(self, fraction: float, note: str | None = None) -> None:
        """Report how far the job is (0..1) and, optionally, what it is doing ("page 3 of 10",
        cut to 200 characters). Costs nothing: the worker sends the newest report with its next
        heartbeat; `pgwork running` and the pgwork.running view show it. A fraction outside
        0..1 (or not a number) raises InvalidArgument here."""
        reported = check_progress(fraction, note)
        with self._lock:
            self._reported = self._unsent = reported

    @property
    def reported_progress(self) -> Progress | None:
        """The newest progress this attempt reported (stored or not yet)."""
        return self._reported

    def checkpoint(self, state: Any) -> bool:
        """Save `state` (small JSON: a page number, a cursor; at most 64 KiB) so that the job's
        next attempt, after a crash, a retry or a release, finds it in `last_checkpoint` and can
        resume there. Written at once, fenced by this attempt's lease: True once stored, False
        when the lease is lost (nothing was saved; the job is stopped, as `should_stop` says).
        A state that is not JSON or too large raises InvalidArgument; an unreachable database
        raises its error (the handler may catch it and carry on)."""
        text = checkpoint_json(state)  # the handler's error, raised before anything is sent
        saved = True if self.saver is None else self.saver(state)
        if saved:
            self.last_checkpoint = json.loads(text)  # a copy: later changes to `state` are not saved
        else:
            self.request_stop(StopReason.LEASE_LOST)
        return saved

    def parent_results(self) -> dict[int, Any]:
        """The results of the parents (`after`) that succeeded, by parent id in id order: what a
        merge reads. A parent that did not succeed is absent (see failed_parents). One query, made
        when called."""
        return {pid: result for pid, (status, result) in self.all_parents().items() if status == "succeeded"}

    def failed_parents(self) -> dict[int, str]:
        """The parents that did not succeed, by id, with their status ('dead' or 'cancelled' for
        a job enqueued with on_parent_failure="run"; empty for a default job, which runs only
        after all succeeded). One query, made when called."""
        return {pid: status for pid, (status, _) in self.all_parents().items() if status != "succeeded"}

    def all_parents(self) -> dict[int, tuple[str, Any]]:
        """Every parent as (status, result), the result None unless it succeeded. One query."""
        if self.parent_reader is None:
            raise RuntimeError(
                "parent_results() needs the worker's database connection: a Job made by hand has none; "
                "set its parent_reader in a test"
            )
        return self.parent_reader()

    def take_progress(self) -> Progress | None:
        """For the heartbeat: the progress reported since the last take, once."""
        with self._lock:
            unsent, self._unsent = self._unsent, None
            return unsent

    def untake_progress(self, progress: Progress) -> None:
        """For the heartbeat whose renewal failed: send it next time, unless a newer one came."""
        with self._lock:
            if self._unsent is None:
                self._unsent = progress

    def request_stop(self, reason: StopReason) -> None:
        """Called by the worker; the first reason wins. The first request also runs what
        `when_stopped` registered (for an async handler: cancelling its task)."""
        with self._lock:
            first = self._reason is None
            if first:
                self._reason = reason
            callbacks, self._on_stop = (self._on_stop, []) if first else ([], self._on_stop)
            stop = self._stop
        if stop is not None:  # else a later `sleep` makes it already set
            stop.set()
        for callback in callbacks:
            callback()

    def when_stopped(self, callback: Callable[[], None]) -> None:
        """Run `callback` (once, on the thread that asks) when the job is told to stop; at once
        if it already was. The worker's hook, not a handler's."""
        with self._lock:
            if self._reason is None:
                self._on_stop.append(callback)
                return
        callback()


_CURRENT: contextvars.ContextVar[Job | None] = contextvars.ContextVar("pgwork_current_job", default=None)


def current_job() -> Job:
    """The job the calling handler is running, for code below the handler that was not handed
    it (a page loop in a library of your own reporting `current_job().progress(...)`)."""
    job = _CURRENT.get()
    if job is None:
        raise RuntimeError("pgwork.current_job() is called outside a handler; pass the Job instead")
    return job


class _Running:
    """A class, not a generator: it is entered once per job, and a generator-based context
    manager costs several times more."""

    __slots__ = ("_job", "_token")

    def __init__(self, job: Job) -> None:
        self._job = job

    def __enter__(self) -> None:
        self._token = _CURRENT.set(self._job)

    def __exit__(self, *exc: object) -> None:
        _CURRENT.reset(self._token)


def running(job: Job) -> _Running:
    """While a handler runs: `current_job()` is `job`."""
    return _Running(job)
