"""`pgwork worker --app MODULE ...`: run handlers from MODULE until SIGTERM (or --burst).

MODULE's `@pgwork.handler` functions, or with `--app MODULE:APP` the handlers of the pgwork.App
named APP in MODULE. The process itself (signals, reaching the database, the worker's life) is
pgwork.worker.serving, which the CLI and `App.run_worker` both call."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from dataclasses import dataclass

from pgwork.dsn import resolve_dsn
from pgwork.quoting import quoted
from pgwork.worker.app import App
from pgwork.worker.childproc import keep_freed_memory
from pgwork.worker.describe import safe_str
from pgwork.worker.options import DEFAULT_MAX_ABANDONED, EXIT_ABANDONED, WorkerOptions
from pgwork.worker.registry import REGISTRY, Registry
from pgwork.worker.serving import Stopper, WorkerUsageError, options_from_values, serve

__all__ = [
    "LoadedApp",
    "WorkerUsageError",
    "cmd_worker",
    "handlers_on_threads",
    "import_app",
    "load_app",
    "options_from_args",
    "register",
]


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
    p.add_argument(
        "--batch-wait",
        default=None,
        metavar="DURATION",
        help="longest a claimed job waits for its batch handler's batch to fill, e.g. 20ms "
        "(default: each batch handler's own batch_wait)",
    )
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
    p.add_argument(
        "--isolation",
        default="thread",
        choices=("thread", "process"),
        help="where handlers run: the worker's threads (default), or spawned child processes that keep "
        "the app loaded and are killed at a timeout (a handler's own isolation= wins)",
    )
    p.add_argument(
        "--max-jobs-per-child",
        default="0",
        metavar="N",
        help="with process isolation, replace a child after N jobs (default 0: never)",
    )
    p.add_argument(
        "--max-memory-per-child",
        default="0",
        metavar="SIZE",
        help="with process isolation, replace a child using more than SIZE after a job, e.g. 4Gi (default 0: never)",
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
        batch_wait=args.batch_wait,
        isolation=args.isolation,
        max_jobs_per_child=args.max_jobs_per_child,
        max_memory_per_child=args.max_memory_per_child,
    )


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
    except SystemExit as exc:
        # sys.exit() (even sys.exit(0)) or exit() while importing: the module never finished
        # loading, so the worker has nothing sound to run; exiting 0 would look like a healthy stop.
        raise WorkerUsageError(
            f"--app: importing {module!r} called sys.exit({quoted(exc.code, 100)}) before it finished; "
            "an app module must only define and register handlers"
        ) from None
    except BaseException as exc:
        what = f"{type(exc).__name__}: {safe_str(exc)}"[:300]
        raise WorkerUsageError(f"--app: importing {module!r} failed: {what}") from None
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
        if not registry.job_types():
            raise WorkerUsageError(
                f"--app: {module} registers no handlers; decorate functions with @pgwork.handler('TYPE') in it, "
                "or name a pgwork.App as MODULE:APP"
            )
        return LoadedApp(registry, None)
    app = getattr(loaded, name, None)
    if not isinstance(app, App):
        what = "nothing" if app is None else f"a {type(app).__name__}"
        raise WorkerUsageError(
            f"--app: {module}.{name} is {what}, not a pgwork.App (name the App object, e.g. --app {module}:app, "
            f"or give the module alone for its @pgwork.handler functions)"
        )
    if not app.registry.job_types():
        raise WorkerUsageError(
            f"--app: {module}:{name} registers no handlers; register them with @{name}.handler('TYPE')"
        )
    return LoadedApp(app.registry.copy(), app.dsn)


def cmd_worker(args: argparse.Namespace) -> int:
    options = options_from_args(args)
    loaded = load_app(options.app)
    if handlers_on_threads(loaded.registry, options):
        # Keep what a job frees for the next one, as children do (childproc.keep_freed_memory).
        # Otherwise a numpy handler on a runner thread faults its arrays in again every job
        # whenever the app's import did not happen to raise glibc's dynamic thresholds first
        # (the lab's cpu-bound app: 1,900 faults and 30% more CPU a job, 125 faults with).
        keep_freed_memory()
    # --dsn, then DATABASE_URL (what a Deployment sets), then the App's own, then libpq's PG*.
    dsn = resolve_dsn(args.dsn) or loaded.dsn or ""
    return serve(options, loaded.registry, dsn, Stopper())


def handlers_on_threads(registry: Registry, options: WorkerOptions) -> bool:
    """Does some handler this worker runs run on its own threads (not in a child process)? Pure."""
    types = options.job_types if options.job_types is not None else registry.job_types()
    return any(not registry.in_process(t, options.isolation) for t in types)
