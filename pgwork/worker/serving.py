"""Running a worker in this process: `serve` is the one way a worker runs (`pgwork worker` and
`App.run_worker` both call it), with the database reached patiently at start, SIGTERM/SIGINT
turned into stop requests, and the pool closed within the shutdown deadline.

Neither the CLI (pgwork.worker.command) nor the library's App (pgwork.worker.app) is imported
here: both import this.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

from pgwork import tracing
from pgwork.budget import pool_size
from pgwork.db import Queue
from pgwork.errors import PERMANENT_CONNECT_ERRORS, PgworkError, Unreachable
from pgwork.worker.heartbeat import TRANSIENT
from pgwork.worker.options import OptionError, WorkerOptions, parse_options
from pgwork.worker.periodic import Periodic
from pgwork.worker.registry import Registry
from pgwork.worker.runtime import Worker

log = logging.getLogger("pgwork.worker")

# How long a stopping worker waits for the pool's background threads (they may be busy
# reconnecting to a server that is down).
CLOSE_SECONDS = 1.0


class WorkerUsageError(PgworkError):
    pass


def options_from_values(**values: Any) -> WorkerOptions:
    """parse_options with the process's environment, as strings (the CLI's or App.run_worker's)."""
    environ = dict(os.environ)
    # Kubernetes sets HOSTNAME to the pod name; a login shell often does not export it.
    if not environ.get("HOSTNAME"):
        environ["HOSTNAME"] = socket.gethostname()
    try:
        return parse_options(environ=environ, **values)
    except OptionError as exc:
        raise WorkerUsageError(str(exc)) from None


class Stopper:
    """A stop request that may come before the worker exists (while the database is still
    being reached) or after: a signal, or App.stop_worker from another thread."""

    def __init__(self) -> None:
        self.stopping = False
        self.worker: Worker | None = None

    def request_stop(self) -> None:
        self.stopping = True
        if self.worker is not None:
            self.worker.request_stop()


@contextmanager
def _signals_to(stopper: Stopper, install: bool) -> Iterator[None]:
    """SIGTERM and SIGINT ask `stopper` to stop while inside; signals can only be set from the
    main thread, so elsewhere (a worker run on a thread of an embedding program) this is a no-op."""
    if not install or threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stopper.request_stop()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _open_queue(dsn: str, options: WorkerOptions, stopper: Stopper) -> Queue | None:
    pause = 0.5
    # Exit 2 with one line naming the server once patience runs out; Kubernetes restarts the pod
    # with its own backoff.
    deadline = time.monotonic() + options.connect_patience
    while True:
        try:
            return Queue(
                dsn,
                pool_size=pool_size(options.concurrency),
                application_name=f"pgwork-worker:{options.worker_id}"[:63],
                prepare=options.listen,
            )
        except (Unreachable, *TRANSIENT) as exc:
            # TRANSIENT: the server went down after accepting the connection (a fast restart
            # terminates it mid-check); the chaos run caught a worker exiting 2 on that.
            if isinstance(exc, PERMANENT_CONNECT_ERRORS):
                raise  # a wrong password or a malformed DSN does not heal by waiting
            if stopper.stopping:
                return None  # told to stop before the database was ever reached: nothing held
            if time.monotonic() + pause > deadline:
                raise Unreachable(
                    f"{exc}; gave up after {options.connect_patience:g}s of retries (--connect-patience)"
                ) from None
            log.warning("%s; retrying in %gs", exc, pause)
            # In short steps, so a SIGTERM while the database is down is answered at once.
            resume = time.monotonic() + pause
            while not stopper.stopping and time.monotonic() < resume:
                time.sleep(min(0.1, max(0.0, resume - time.monotonic())))
            if stopper.stopping:
                return None
            pause = min(pause * 2, 10.0)


def serve(
    options: WorkerOptions, registry: Registry, dsn: str, stopper: Stopper, *, handle_signals: bool = True
) -> int:
    """Run a worker over `registry` until stopped (or, with burst, until nothing is ready)."""
    provider = tracing.configure_from_env()
    with _signals_to(stopper, handle_signals):
        queue = _open_queue(dsn, options, stopper)
        if queue is None:
            return 0
        worker: Worker | None = None
        try:
            worker = Worker(queue, options, registry, tracer_provider=provider, prepare=options.listen)
            stopper.worker = worker
            try:
                worker.start_metrics()
            except OSError as exc:
                raise WorkerUsageError(
                    f"--metrics-port: cannot serve on port {options.metrics_port} ({exc.strerror or exc}); "
                    "pick a free port, or 0 to turn metrics off"
                ) from None
            if stopper.stopping:
                worker.request_stop()
            periodic = Periodic(queue, registry.schedules).start() if registry.schedules else None
            try:
                return worker.run()
            finally:
                if periodic is not None:
                    periodic.stop()
        finally:
            if worker is not None:
                worker.runners.discard()  # closes an event loop that never started; else nothing
            stopper.worker = None
            queue.close(timeout=min(CLOSE_SECONDS, worker.remaining()) if worker is not None else CLOSE_SECONDS)
            tracing.shutdown(provider)
