"""`pgwork worker --app MODULE ...`: run handlers from MODULE until SIGTERM (or --burst).

MODULE's `@pgwork.handler` functions, or with `--app MODULE:APP` the handlers of the pgwork.App
named APP in MODULE. `serve` is the one way a worker runs: the CLI and `App.run_worker` both
call it."""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import FrameType
from typing import Any

from pgwork import tracing
from pgwork.db import Queue
from pgwork.dsn import resolve_dsn
from pgwork.errors import PERMANENT_CONNECT_ERRORS, PgworkError, Unreachable
from pgwork.worker.app import App
from pgwork.worker.heartbeat import TRANSIENT
from pgwork.worker.options import OptionError, WorkerOptions, parse_options
from pgwork.worker.registry import REGISTRY, Registry
from pgwork.worker.runtime import Worker
from pgwork.worker.timeouts import DEFAULT_MAX_ABANDONED, EXIT_ABANDONED

log = logging.getLogger("pgwork.worker")

# How long a stopping worker waits for the pool's background threads (they may be busy
# reconnecting to a server that is down).
CLOSE_SECONDS = 1.0


class WorkerUsageError(PgworkError):
    pass


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    text = "run job handlers from a module until SIGTERM (drains running jobs first)"
    p = subparsers.add_parser("worker", help=text, description=text)
    p.set_defaults(func=cmd_worker)
    p.add_argument(
        "--app",
        required=True,
        metavar="MODULE[:APP]",
        help="module whose @pgwork.handler functions to run, or MODULE:APP for the pgwork.App named APP in it",
    )
    p.add_argument("--job-types", metavar="A,B", help="only these job types (default: every type MODULE handles)")
    p.add_argument("--concurrency", default="1", metavar="N", help="jobs running at once in this process (default 1)")
    p.add_argument("--batch", default="1", metavar="N", help="claim up to N jobs per statement, for short jobs")
    p.add_argument("--lease", default="30s", help="lease per claim, renewed by heartbeats (default 30s)")
    p.add_argument("--heartbeat", default=None, help="renewal interval, at most a third of --lease (default lease/3)")
    p.add_argument("--burst", action="store_true", help="exit 0 once no job is ready and none is running")
    p.add_argument("--metrics-port", default="9100", help="port for /metrics, /healthz, /readyz; 0 turns it off")
    p.add_argument("--grace", default="30s", help="on SIGTERM, how long running jobs may finish (default 30s)")
    p.add_argument("--id", dest="worker_id", help="owner name on claimed jobs (default: $HOSTNAME, the pod name)")
    p.add_argument(
        "--no-listen",
        action="store_true",
        help="poll only, no LISTEN and no prepared statements (behind a transaction-mode pooler)",
    )
    p.add_argument("--poll", default="1s", help="poll interval, the fallback to LISTEN (default 1s)")
    p.add_argument(
        "--connect-patience",
        default="60s",
        help="at startup, how long to retry an unreachable database before exiting 2 (default 60s)",
    )
    p.add_argument(
        "--max-abandoned",
        default=str(DEFAULT_MAX_ABANDONED),
        metavar="N",
        help="handler threads stuck past their timeout to tolerate; one more and the worker drains and exits "
        f"{EXIT_ABANDONED} (default {DEFAULT_MAX_ABANDONED})",
    )


def options_from_args(args: argparse.Namespace) -> WorkerOptions:
    return options_from_values(
        app=args.app,
        worker_id=args.worker_id,
        job_types=args.job_types,
        concurrency=args.concurrency,
        batch=args.batch,
        lease=args.lease,
        heartbeat=args.heartbeat,
        burst=args.burst,
        metrics_port=args.metrics_port,
        grace=args.grace,
        listen=not args.no_listen,
        poll=args.poll,
        connect_patience=args.connect_patience,
        max_abandoned=args.max_abandoned,
    )


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


@dataclass(frozen=True)
class LoadedApp:
    registry: Registry
    dsn: str | None  # an App's own connection string; None for a module of @pgwork.handler


def import_app(target: str) -> Registry:
    return load_app(target).registry


def load_app(target: str) -> LoadedApp:
    """MODULE: the handlers it registered (its @pgwork.handler decorators fill the global
    registry; whatever else filled it is not this worker's business). MODULE:APP: the handlers
    of the pgwork.App named APP in MODULE, and its connection string."""
    module, _, name = target.partition(":")
    before = REGISTRY.snapshot()
    # `pgwork worker` run from a project directory should find the project's modules.
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        loaded = importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name and module.startswith(exc.name):
            raise WorkerUsageError(f"--app: cannot import {module!r} ({exc}); is it on PYTHONPATH?") from None
        raise WorkerUsageError(f"--app: importing {module!r} failed: {exc}") from None
    except Exception as exc:
        raise WorkerUsageError(f"--app: importing {module!r} failed: {type(exc).__name__}: {exc}") from None
    if not name:
        registry = REGISTRY.registered_by(module, before)
        apps = [n for n, value in vars(loaded).items() if isinstance(value, App)]
        if not registry.job_types() and apps:
            # `--app myapp` for a module whose handlers hang off an App: name the App.
            also = f" (also: {', '.join(apps[1:])})" if apps[1:] else ""
            raise WorkerUsageError(
                f"--app: {module} registers no @pgwork.handler functions, but defines the pgwork.App {apps[0]!r}"
                f"{also}: run it with --app {module}:{apps[0]}"
            )
        return LoadedApp(registry, None)
    app = getattr(loaded, name, None)
    if not isinstance(app, App):
        what = "nothing" if app is None else f"a {type(app).__name__}"
        raise WorkerUsageError(
            f"--app: {module}.{name} is {what}, not a pgwork.App (name the App object, e.g. --app {module}:app, "
            f"or give the module alone for its @pgwork.handler functions)"
        )
    return LoadedApp(app.registry.copy(), app.dsn)


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


def _open_queue(dsn: str, options: WorkerOptions, registry: Registry, stopper: Stopper) -> Queue | None:
    pause = 0.5
    # Exit 2 with one line naming the server once patience runs out; Kubernetes restarts the pod
    # with its own backoff.
    deadline = time.monotonic() + options.connect_patience
    while True:
        try:
            return Queue(
                dsn,
                pool_size=min(options.concurrency, 8) + 1,
                application_name=f"pgwork-worker:{options.worker_id}"[:63],
                prepare=options.listen,
                backoffs=registry.backoffs(),
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


def cmd_worker(args: argparse.Namespace) -> int:
    options = options_from_args(args)
    loaded = load_app(options.app)
    # --dsn, then DATABASE_URL (what a Deployment sets), then the App's own, then libpq's PG*.
    dsn = resolve_dsn(args.dsn) or loaded.dsn or ""
    return serve(options, loaded.registry, dsn, Stopper())


def serve(
    options: WorkerOptions, registry: Registry, dsn: str, stopper: Stopper, *, handle_signals: bool = True
) -> int:
    """Run a worker over `registry` until stopped (or, with burst, until nothing is ready)."""
    provider = tracing.configure_from_env()
    with _signals_to(stopper, handle_signals):
        queue = _open_queue(dsn, options, registry, stopper)
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
            return worker.run()
        finally:
            stopper.worker = None
            queue.close(timeout=min(CLOSE_SECONDS, worker.remaining()) if worker is not None else CLOSE_SECONDS)
            tracing.shutdown(provider)
