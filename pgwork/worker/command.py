"""`pgwork worker --app MODULE ...`: run handlers from MODULE until SIGTERM (or --burst)."""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import signal
import socket
import sys
import time
from types import FrameType

from pgwork import tracing
from pgwork.db import Queue
from pgwork.dsn import resolve_dsn
from pgwork.errors import PERMANENT_CONNECT_ERRORS, PgworkError, Unreachable
from pgwork.worker.heartbeat import TRANSIENT
from pgwork.worker.options import OptionError, WorkerOptions, parse_options
from pgwork.worker.registry import REGISTRY, Registry
from pgwork.worker.runtime import Worker

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
    p.add_argument("--app", required=True, metavar="MODULE", help="module whose @pgwork.handler functions to run")
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


def options_from_args(args: argparse.Namespace) -> WorkerOptions:
    environ = dict(os.environ)
    # Kubernetes sets HOSTNAME to the pod name; a login shell often does not export it.
    if not environ.get("HOSTNAME"):
        environ["HOSTNAME"] = socket.gethostname()
    try:
        return parse_options(
            app=args.app,
            worker_id=args.worker_id,
            environ=environ,
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
        )
    except OptionError as exc:
        raise WorkerUsageError(str(exc)) from None


def import_app(module: str) -> Registry:
    """Import the handler module and return the handlers it registered (its @pgwork.handler
    decorators fill the global registry; whatever else filled it is not this worker's business)."""
    before = REGISTRY.snapshot()
    # `pgwork worker` run from a project directory should find the project's modules.
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name and module.startswith(exc.name):
            raise WorkerUsageError(f"--app: cannot import {module!r} ({exc}); is it on PYTHONPATH?") from None
        raise WorkerUsageError(f"--app: importing {module!r} failed: {exc}") from None
    except Exception as exc:
        raise WorkerUsageError(f"--app: importing {module!r} failed: {type(exc).__name__}: {exc}") from None
    return REGISTRY.registered_by(module, before)


def _open_queue(dsn: str, options: WorkerOptions, stopping: list[bool]) -> Queue | None:
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
            )
        except (Unreachable, *TRANSIENT) as exc:
            # TRANSIENT: the server went down after accepting the connection (a fast restart
            # terminates it mid-check); the chaos run caught a worker exiting 2 on that.
            if isinstance(exc, PERMANENT_CONNECT_ERRORS):
                raise  # a wrong password or a malformed DSN does not heal by waiting
            if stopping[0]:
                return None  # told to stop before the database was ever reached: nothing held
            if time.monotonic() + pause > deadline:
                raise Unreachable(
                    f"{exc}; gave up after {options.connect_patience:g}s of retries (--connect-patience)"
                ) from None
            log.warning("%s; retrying in %gs", exc, pause)
            # In short steps, so a SIGTERM while the database is down is answered at once.
            resume = time.monotonic() + pause
            while not stopping[0] and time.monotonic() < resume:
                time.sleep(min(0.1, max(0.0, resume - time.monotonic())))
            if stopping[0]:
                return None
            pause = min(pause * 2, 10.0)


def cmd_worker(args: argparse.Namespace) -> int:
    options = options_from_args(args)
    registry = import_app(options.app)
    provider = tracing.configure_from_env()
    stopping = [False]
    worker: Worker | None = None

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stopping[0] = True
        if worker is not None:
            worker.request_stop()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    queue = _open_queue(resolve_dsn(args.dsn), options, stopping)
    if queue is None:
        return 0
    try:
        worker = Worker(queue, options, registry, tracer_provider=provider, prepare=options.listen)
        try:
            worker.start_metrics()
        except OSError as exc:
            raise WorkerUsageError(
                f"--metrics-port: cannot serve on port {options.metrics_port} ({exc.strerror or exc}); "
                "pick a free port, or 0 to turn metrics off"
            ) from None
        if stopping[0]:
            worker.request_stop()
        return worker.run()
    finally:
        queue.close(timeout=min(CLOSE_SECONDS, worker.remaining()) if worker is not None else CLOSE_SECONDS)
        tracing.shutdown(provider)
