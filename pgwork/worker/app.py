"""`pgwork.App`: handlers, producing and a worker in one object, for a program that is both.

    app = pgwork.App(os.environ["DATABASE_URL"])

    @app.handler("ocr", max_attempts=3, backoff=pgwork.Backoff(base=10), timeout="10m")
    def ocr(job: pgwork.Job) -> dict[str, Any]: ...      # or: async def ocr(job) -> ...

    job_id = app.enqueue("ocr", {"doc": 7})
    app.wait(job_id, timeout=60)         # the result, or JobFailed / WaitTimeout
    app.run_worker(concurrency=4)        # or: pgwork worker --app myapp.jobs:app

An App's handlers live in its own Registry, never in the module-global one `@pgwork.handler`
fills, so two Apps in one process (or an App beside module-level handlers) stay apart. Nothing
connects until the first call that needs the database: `pgwork worker --app MODULE:APP` imports
the module that builds the App and opens its own worker Queue.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, TypedDict, Unpack

from pgwork.backoff import Backoff
from pgwork.db import Queue
from pgwork.db.connect import AnyConnection
from pgwork.db.rows import JobRow, ResultRow
from pgwork.db.wait import wait_for_job
from pgwork.dsn import resolve_dsn
from pgwork.errors import InvalidArgument
from pgwork.models import CancelReport
from pgwork.schedule import DEFAULT_CATCH_UP_LIMIT, Schedule
from pgwork.validation import check_timeout
from pgwork.worker.options import DEFAULT_MAX_ABANDONED, is_app_name
from pgwork.worker.registry import REGISTRY, F, Registry, check_batch, check_isolation, handler

if TYPE_CHECKING:
    from pgwork.worker.serving import Stopper

DEFAULT_MAX_ATTEMPTS = 5


class EnqueueOptions(TypedDict, total=False):
    key: str | None
    priority: int
    delay: float | None
    available_at: datetime | None
    trace_context: dict[str, str] | None
    timeout: float | str | timedelta | None


class App:
    """Handlers registered on this object, a Queue opened on first use, and `run_worker`."""

    def __init__(
        self,
        dsn: str | None = None,
        *,
        name: str = "app",
        backoff: Backoff | None = None,
        pool_size: int = 4,
    ) -> None:
        """`dsn` None: DATABASE_URL, else libpq's PG* variables. `backoff` is the default for
        this App's handlers that do not give their own. `name` labels its worker's log lines
        and connections: a dotted name like a module's (e.g. "ocr_service" or "myapp.jobs:app")."""
        if not isinstance(name, str) or not is_app_name(name):
            raise InvalidArgument(
                "name", f"{name!r} is not a dotted name", 'use letters, digits, _ and dots, e.g. "ocr_service"'
            )
        self.dsn = dsn
        self.name = name
        self.backoff = backoff
        self.pool_size = pool_size
        self.registry = Registry()
        self._queue: Queue | None = None
        self._lock = threading.Lock()
        self._stopper: Stopper | None = None  # while run_worker runs

    # -- handlers -------------------------------------------------------------------------

    def handler(
        self,
        job_type: str,
        *,
        max_attempts: int | None = None,
        backoff: Backoff | None = None,
        timeout: float | str | timedelta | None = None,
        batch: int | None = None,
        batch_wait: float | str | timedelta | None = None,
        isolation: str | None = None,
    ) -> Callable[[F], F]:
        """Register the decorated function (plain or `async def`) for `job_type` on this App
        only. `max_attempts` is the default `enqueue` gives its jobs; `backoff` spaces the
        retries of its failures; `timeout` ("10m", seconds, or a timedelta) bounds each attempt
        (a job's own overrides it). `batch=N`: a batch handler, called with a list of up to N
        jobs, waiting at most `batch_wait` for the batch to fill (see pgwork.handler).
        `isolation="process"` runs it in child processes (the App must then be importable as
        `name`, "MODULE:APP", for the children to load it)."""
        seconds = check_timeout(timeout)  # at the decorator line, before any function is given
        size, wait = check_batch(batch, batch_wait)
        check_isolation(isolation)

        def decorate(func: F) -> F:
            self.registry.register(
                job_type,
                func,
                max_attempts=max_attempts,
                backoff=backoff or self.backoff,
                timeout=seconds,
                batch=size,
                batch_wait=wait,
                isolation=isolation,
            )
            return func

        return decorate

    def periodic(
        self,
        cron: str,
        *,
        job_type: str | None = None,
        payload: dict[str, Any] | None = None,
        name: str | None = None,
        time_zone: str = "UTC",
        missed: str = "skip",
        catch_up_limit: int = DEFAULT_CATCH_UP_LIMIT,
    ) -> Callable[[F], F]:
        """Enqueue a `job_type` job (default: the decorated function's name, which is registered
        as its handler unless one is) on each tick of `cron`, from the workers `run_worker` runs,
        each tick exactly once however many run (pgwork.schedule). `missed`: "skip" or "catchUp"
        (the newest `catch_up_limit` ticks missed while no worker ran). `name` (default the job
        type) keys the ticks: keep it when the cron changes, so no tick runs twice."""

        schedule = functools.partial(
            Schedule,
            cron=cron,
            payload=payload or {},
            time_zone=time_zone,
            missed=missed,
            catch_up_limit=catch_up_limit,
        )
        return _periodic(
            self.registry,
            register=self.handler,
            max_attempts=self.max_attempts_for,
            schedule=schedule,
            job_type=job_type,
            name=name,
        )

    # -- the database ---------------------------------------------------------------------

    @property
    def queue(self) -> Queue:
        """This App's Queue, opened on first use (the rest of the Queue's API is here)."""
        with self._lock:
            if self._queue is None:
                self._queue = Queue(
                    self.resolved_dsn(),
                    pool_size=self.pool_size,
                    backoff=self.backoff,
                    backoffs=self.registry.backoffs(),
                    application_name=f"pgwork-app:{self.name}"[:63],
                )
            return self._queue

    def resolved_dsn(self) -> str:
        return self.dsn if self.dsn is not None else resolve_dsn(None)

    def close(self) -> None:
        with self._lock:
            if self._queue is not None:
                self._queue.close()
                self._queue = None

    def __enter__(self) -> App:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- producing and asking -------------------------------------------------------------

    def max_attempts_for(self, job_type: str) -> int:
        return max_attempts_in(self.registry, job_type)

    def enqueue(
        self,
        job_type: str,
        payload: dict[str, Any] | None = None,
        *,
        max_attempts: int | None = None,
        conn: AnyConnection | None = None,
        **options: Unpack[EnqueueOptions],
    ) -> int:
        """Queue.enqueue (key, priority, delay, available_at, trace_context, timeout as there), with
        `max_attempts` defaulting to the one the type's handler was registered with. With
        `conn`, the job exists iff the caller's transaction commits."""
        attempts = self.max_attempts_for(job_type) if max_attempts is None else max_attempts
        return self.queue.enqueue(job_type, payload, max_attempts=attempts, conn=conn, **options)

    def job(self, job_id: int) -> JobRow | None:
        return self.queue.job(job_id)

    def result(self, key: str) -> ResultRow | None:
        return self.queue.result(key)

    def cancel(self, ids: Sequence[int]) -> CancelReport:
        return self.queue.cancel(ids)

    def wait(self, job_id: int, *, timeout: float = 60.0, poll: float = 1.0, result: bool = True) -> Any:
        """Block until the job finishes and return its result (None with `result=False`).
        Raises pgwork.JobFailed (dead or cancelled; it carries the job's last error) or
        pgwork.WaitTimeout. LISTENs for the completion on its own connection, and polls every
        `poll` seconds as the fallback."""
        return wait_for_job(self.resolved_dsn(), job_id, timeout=timeout, poll=poll, result=result)

    # -- working --------------------------------------------------------------------------

    def run_worker(
        self,
        *,
        job_types: Sequence[str] | None = None,
        concurrency: int = 1,
        batch: int = 1,
        batch_wait: float | str | None = None,
        lease: float | str = "30s",
        heartbeat: float | str | None = None,
        burst: bool = False,
        metrics_port: int = 0,
        grace: float | str = "30s",
        worker_id: str | None = None,
        listen: bool = True,
        poll: float | str = "1s",
        connect_patience: float | str = "60s",
        max_abandoned: int = DEFAULT_MAX_ABANDONED,
        handle_signals: bool = True,
        isolation: str = "thread",
        max_jobs_per_child: int = 0,
        max_memory_per_child: int | str = 0,
    ) -> int:
        """Run this App's handlers in this process, as `pgwork worker --app MODULE:APP` would,
        until `stop_worker()`, SIGTERM/SIGINT (when called from the main thread and
        `handle_signals`), or with `burst` until nothing is ready. Returns the exit code: 0, or
        3 once more handler threads got stuck past their timeouts than `max_abandoned`.
        Options are checked as the CLI's are; `metrics_port` is off (0) unless given."""
        # Imported here: `import pgwork` stays light (no worker runtime, no tracing SDK).
        from pgwork.worker.serving import Stopper, options_from_values, serve

        options = options_from_values(
            app=self.name,
            job_types=None if job_types is None else ",".join(job_types),
            concurrency=str(concurrency),
            batch=str(batch),
            batch_wait=None if batch_wait is None else str(batch_wait),
            lease=str(lease),
            heartbeat=None if heartbeat is None else str(heartbeat),
            burst=burst,
            metrics_port=str(metrics_port),
            grace=str(grace),
            worker_id=worker_id,
            listen=listen,
            poll=str(poll),
            connect_patience=str(connect_patience),
            max_abandoned=str(max_abandoned),
            isolation=isolation,
            max_jobs_per_child=str(max_jobs_per_child),
            max_memory_per_child=str(max_memory_per_child),
        )
        stopper = Stopper()
        self._stopper = stopper
        try:
            return serve(
                options,
                self.registry.copy(),
                self.resolved_dsn(),
                stopper,
                handle_signals=handle_signals,
            )
        finally:
            self._stopper = None

    def stop_worker(self) -> None:
        """Ask the worker `run_worker` runs to drain (a second call releases at once)."""
        stopper = self._stopper
        if stopper is not None:
            stopper.request_stop()


def periodic(
    cron: str,
    *,
    job_type: str | None = None,
    payload: dict[str, Any] | None = None,
    name: str | None = None,
    time_zone: str = "UTC",
    missed: str = "skip",
    catch_up_limit: int = DEFAULT_CATCH_UP_LIMIT,
) -> Callable[[F], F]:
    """`App.periodic` for a module of `@pgwork.handler` functions (`pgwork worker --app MODULE`)."""
    schedule = functools.partial(
        Schedule, cron=cron, payload=payload or {}, time_zone=time_zone, missed=missed, catch_up_limit=catch_up_limit
    )

    attempts = functools.partial(max_attempts_in, REGISTRY)
    return _periodic(REGISTRY, register=handler, max_attempts=attempts, schedule=schedule, job_type=job_type, name=name)


def max_attempts_in(registry: Registry, job_type: str) -> int:
    """The attempts `job_type`'s handler in `registry` gives its jobs by default."""
    spec = registry.spec(job_type)
    return spec.max_attempts if spec is not None and spec.max_attempts is not None else DEFAULT_MAX_ATTEMPTS


def _periodic(
    registry: Registry,
    *,
    register: Callable[[str], Callable[[F], F]],
    max_attempts: Callable[[str], int],
    schedule: Callable[..., Schedule],
    job_type: str | None,
    name: str | None,
) -> Callable[[F], F]:
    def decorate(func: F) -> F:
        chosen = job_type or func.__name__
        made = schedule(
            name=name or chosen.lower().replace(":", ".").replace("/", "."),
            job_type=chosen,
            max_attempts=max_attempts(chosen),
        )
        if registry.spec(chosen) is None:
            register(chosen)(func)
        registry.add_schedule(made)
        return func

    return decorate
