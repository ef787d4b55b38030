"""`pgwork chaos`: the fault-injection run with its invariants (see docs/reliability.md)."""

from __future__ import annotations

import argparse
import json
import logging
import signal
from types import FrameType

from pgwork.durations import parse_duration
from pgwork.errors import PgworkError
from pgwork.tables import render
from pgwork.tools.chaos import failover
from pgwork.tools.chaos.harness import Config, run
from pgwork.tools.chaos.invariants import as_rows


def configure(p: argparse.ArgumentParser) -> None:
    """`pgwork chaos`'s options (the CLI made the subparser)."""
    p.set_defaults(func=cmd_chaos)
    p.add_argument("--jobs", type=int, default=2000)
    p.add_argument("--workers", type=int, default=6)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--duration", default="45s", help="how long the injector runs (default 45s)")
    p.add_argument("--concurrency", type=int, default=4, help="per worker")
    p.add_argument("--lease", default="3s")
    p.add_argument("--heartbeat", default="1s")
    p.add_argument("--faults-per-minute", type=float, default=24.0)
    p.add_argument(
        "--failover",
        choices=("sync", "async"),
        help="instead of the random faults: a streaming standby, the primary killed (-9) mid-run and the standby "
        "promoted, workers and reaper on a multi-host DSN; sync or async replication",
    )
    p.add_argument("--keep", action="store_true", help="keep the server's files and worker logs")
    p.add_argument("--json", action="store_true", help="print the figures as JSON")


def _seconds(text: str, field: str) -> float:
    try:
        return parse_duration(text, field)
    except ValueError as exc:
        raise PgworkError(str(exc)) from None


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def cmd_chaos(args: argparse.Namespace) -> int:
    if args.dsn:
        raise PgworkError("--dsn: chaos restarts its database, so it always starts a private one; drop --dsn")
    config = Config(
        jobs=args.jobs,
        workers=args.workers,
        seed=args.seed,
        duration=_seconds(args.duration, "--duration"),
        concurrency=args.concurrency,
        lease=_seconds(args.lease, "--lease"),
        heartbeat=_seconds(args.heartbeat, "--heartbeat"),
        faults_per_minute=args.faults_per_minute,
    )
    logging.getLogger("pgwork.tools.chaos").setLevel(logging.INFO)
    # Stopped from outside (CI cancelling, Ctrl-C, even when started in the background with
    # SIGINT ignored): unwind, so the workers are stopped and the private server shut down.
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, _interrupt)
    extra: list[tuple[str, object]] = []
    if args.failover:
        report, figures = failover.run(config, args.failover, keep=args.keep)
        extra = failover.describe(figures)
    else:
        report = run(config, keep=args.keep)
    if args.json:
        rows = {r["figure"]: r["value"] for r in report.rows()} | dict(extra)
        print(json.dumps(rows | {"violations": report.violations}))
    else:
        print(render(as_rows(extra)) + "\n" if extra else "", end="")
        print(report.render())
    return 0 if report.ok else 1
