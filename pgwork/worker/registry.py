"""What a handler module sees: `@handler("TYPE")`, the `Job` it receives, and `PermanentError`.

A handler is a function `Job -> JSON value`, plain or `async def`. A plain one runs on a runner
thread, an `async def` one as a task on the worker's event loop; either way with no database
transaction open, and the worker writes its result through the fenced succeed, never the handler.

A batch handler (`batch=N`) is a function `list[Job] -> list[JSON value | Exception]`: called with
up to N jobs of its type at once, it returns one entry per job, in order. An exception instance in
a job's place fails that job alone (a PermanentError fails it for good); raising fails every job
of the call. Each job is still fenced, heartbeated, timed out, cancelled and finished on its own.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, TypeVar

from pgwork.backoff import Backoff
from pgwork.durations import parse_duration
from pgwork.errors import InvalidArgument
from pgwork.quoting import quoted
from pgwork.schedule import Schedule, check
from pgwork.validation import check_int, check_job_type, check_timeout

# A plain `Job -> JSON value` function, or an `async def` one (its call returns a coroutine); a
# batch handler takes a `list[Job]` instead.
HandlerFunc = Callable[[Any], Any]
# The most jobs one batch handler call may take, and the longest a claimed job waits for its batch.
MAX_BATCH = 10_000
MAX_BATCH_WAIT = 300.0  # the operator's spec.worker.batchWait allows up to 5m too
F = TypeVar("F", bound=HandlerFunc)


@dataclass(frozen=True)
class HandlerSpec:
    """What a handler was registered with besides its function. `max_attempts` is the default
    App.enqueue gives jobs of its type (None: the Queue's default of 5); `backoff` spaces the
    retries of its failed attempts (None: the worker Queue's backoff); `timeout` is the hard
    timeout in seconds of each attempt (None: none), which a job's own timeout overrides."""

    job_type: str
    func: HandlerFunc
    max_attempts: int | None = None
    backoff: Backoff | None = None
    timeout: float | None = None
    # A batch handler: called with up to `batch` jobs at once (None: one Job per call), after
    # waiting at most `batch_wait` seconds from the first job's claim for the batch to fill.
    batch: int | None = None
    batch_wait: float = 0.0
    isolation: str | None = None  # "thread" or "process"; None: the worker's --isolation

    @property
    def is_async(self) -> bool:
        """An `async def` handler (or a callable whose call returns a coroutine by its
        definition): the worker awaits it on its event loop instead of calling it on a thread."""
        return is_async_callable(self.func)


class Registry:
    """Handlers by job type."""

    def __init__(self) -> None:
        self._specs: dict[str, HandlerSpec] = {}
        # Periodic jobs (`@app.periodic`) the worker fires (pgwork.worker.periodic).
        self.schedules: list[Schedule] = []

    def add_schedule(self, schedule: Schedule) -> Schedule:
        check(schedule)
        if any(s.name == schedule.name for s in self.schedules):
            raise InvalidArgument("name", f"schedule {schedule.name!r} is declared twice", "give each its own name")
        self.schedules.append(schedule)
        return schedule

    def register(
        self,
        job_type: str,
        func: HandlerFunc,
        *,
        max_attempts: int | None = None,
        backoff: Backoff | None = None,
        timeout: float | str | timedelta | None = None,
        batch: int | None = None,
        batch_wait: float | str | timedelta | None = None,
        isolation: str | None = None,
    ) -> HandlerFunc:
        check_job_type(job_type)
        check_isolation(isolation)
        seconds = check_timeout(timeout)
        size, wait = check_batch(batch, batch_wait)
        check_handler(func)
        if max_attempts is not None:
            check_int(max_attempts, "max_attempts", 1, 32767, "use at least 1 (1 means no retry)")
        if backoff is not None and not isinstance(backoff, Backoff):
            raise InvalidArgument(
                "backoff", f"must be a pgwork.Backoff, got {type(backoff).__name__}", "e.g. Backoff(base=5)"
            )
        existing = self._specs.get(job_type)
        if existing is not None and existing.func is not func:
            raise ValueError(
                f"job type {job_type!r} already has a handler ({_name(existing.func)}); register one handler per type"
            )
        self._specs[job_type] = HandlerSpec(
            job_type, func, max_attempts, backoff, seconds, size, wait or 0.0, isolation
        )
        return func

    def get(self, job_type: str) -> HandlerFunc | None:
        spec = self._specs.get(job_type)
        return spec.func if spec is not None else None

    def spec(self, job_type: str) -> HandlerSpec | None:
        return self._specs.get(job_type)

    def is_async(self, job_type: str) -> bool:
        spec = self._specs.get(job_type)
        return spec is not None and spec.is_async

    def kinds(self, job_types: list[str], default_isolation: str = "thread") -> tuple[bool, bool]:
        """(any job on a runner thread, any on the event loop) among `job_types`: which runners a
        worker needs. A job in a child process (async or not) waits for it on a runner thread."""
        loop = [self.is_async(t) and not self.in_process(t, default_isolation) for t in job_types]
        return (not all(loop), any(loop))

    def in_process(self, job_type: str, default_isolation: str) -> bool:
        """Does `job_type`'s handler run in a child process (its own isolation=, else the worker's)?"""
        spec = self._specs.get(job_type)
        chosen = spec.isolation if spec is not None and spec.isolation is not None else default_isolation
        return chosen == "process"

    def backoffs(self) -> dict[str, Backoff]:
        """The job types registered with a backoff of their own, for the worker's Queue."""
        return {t: s.backoff for t, s in self._specs.items() if s.backoff is not None}

    def job_types(self) -> list[str]:
        return sorted(self._specs)

    def snapshot(self) -> dict[str, HandlerFunc]:
        return {t: s.func for t, s in self._specs.items()}

    def registered_by(self, module: str, before: dict[str, HandlerFunc]) -> Registry:
        """The handlers `module` brought: those registered since `before` was taken (while it was
        imported, with whatever it imports), plus those defined in `module` or its submodules (it
        may have been imported earlier), with their schedules. Nothing else: a worker must never take the job types of
        a module it was not asked to run (pgwork's own lab and chaos apps among them)."""
        chosen = Registry()
        for job_type, spec in self._specs.items():
            defined_in = getattr(spec.func, "__module__", None) or ""
            new = before.get(job_type) is not spec.func
            if new or defined_in == module or defined_in.startswith(module + "."):
                chosen._specs[job_type] = spec
        # And the schedules (@pgwork.periodic) of the job types it handles.
        chosen.schedules = [s for s in self.schedules if s.job_type in chosen._specs]
        return chosen

    def copy(self) -> Registry:
        chosen = Registry()
        chosen._specs = dict(self._specs)
        chosen.schedules = list(self.schedules)
        return chosen

    def clear(self) -> None:
        self._specs.clear()
        self.schedules.clear()


# The registry `@pgwork.handler` fills when `pgwork worker --app MODULE` imports the module.
REGISTRY = Registry()


def handler(
    job_type: str,
    *,
    timeout: float | str | timedelta | None = None,
    batch: int | None = None,
    batch_wait: float | str | timedelta | None = None,
    isolation: str | None = None,
) -> Callable[[F], F]:
    """Register the decorated function (plain or `async def`) as the handler for `job_type`.
    `timeout` ("10m", seconds, or a timedelta) bounds each attempt: past it the attempt fails and
    retries by its backoff. `batch=N` makes it a batch handler, called with a list of up to N jobs
    and returning one result (or exception) per job, in order; `batch_wait` ("20ms", seconds) is
    the longest a claimed job waits for more jobs to fill its batch (default 0: call with what is
    there). `isolation="process"` runs it in the worker's child processes whatever `--isolation`
    says ("thread": on the worker's threads)."""
    seconds = check_timeout(timeout)  # at the decorator line, before any function is given
    size, wait = check_batch(batch, batch_wait)
    check_isolation(isolation)

    def decorate(func: F) -> F:
        REGISTRY.register(job_type, func, timeout=seconds, batch=size, batch_wait=wait, isolation=isolation)
        return func

    return decorate


def check_batch(batch: object, batch_wait: object) -> tuple[int | None, float | None]:
    """A batch handler's size and wait in seconds; (None, None): not a batch handler."""
    size = None if batch is None else check_int(batch, "batch", 1, MAX_BATCH, "how many jobs one call takes, e.g. 64")
    if batch_wait is None:
        return size, None if size is None else 0.0
    fix = 'give a short duration, e.g. batch_wait="20ms" (at most 5m), or leave it out for no wait'
    if size is None:
        raise InvalidArgument("batch_wait", "is only for batch handlers", "give batch=N too, or leave batch_wait out")
    if isinstance(batch_wait, timedelta):
        wait = batch_wait.total_seconds()
    elif isinstance(batch_wait, str):
        try:
            wait = parse_duration(batch_wait, "batch_wait")
        except ValueError:
            raise InvalidArgument("batch_wait", f"{quoted(batch_wait)} is not a duration", fix) from None
    elif isinstance(batch_wait, int | float) and not isinstance(batch_wait, bool):
        wait = float(batch_wait)
    else:
        raise InvalidArgument("batch_wait", f"must be seconds or a duration, got {quoted(batch_wait)}", fix)
    if not 0.0 <= wait <= MAX_BATCH_WAIT:
        raise InvalidArgument("batch_wait", f"{quoted(batch_wait)} is out of range 0..5m", fix)
    return size, wait


def check_handler(func: object) -> None:
    """A handler is called with the Job and returns (or, async, resolves to) the result; a
    generator's yields would never reach the database, so it is refused here, not at run time."""
    if not callable(func):
        raise InvalidArgument("handler", f"{func!r} is not callable", "decorate a function that takes the Job")
    if inspect.isgeneratorfunction(func) or inspect.isasyncgenfunction(func):
        raise InvalidArgument(
            "handler",
            f"{_name(func)} is a generator function (it yields), so its result would never be stored",
            "return the result instead of yielding it",
        )


def check_isolation(isolation: object) -> None:
    if isolation is not None and isolation not in ("thread", "process"):
        raise InvalidArgument(
            "isolation", f"{isolation!r} is not a choice", 'use "thread" or "process" (or leave it out)'
        )


def is_async_callable(func: object) -> bool:
    """`async def` functions, partials of them, and objects whose `__call__` is `async def`."""
    while isinstance(func, functools.partial):
        func = func.func
    call = inspect.getattr_static(type(func), "__call__", None)
    return inspect.iscoroutinefunction(func) or inspect.iscoroutinefunction(call)


def _name(func: object) -> str:
    return f"{getattr(func, '__module__', '?')}.{getattr(func, '__qualname__', repr(func))}"
