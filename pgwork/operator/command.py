"""`pgwork operator`: run the JobQueue operator (kopf) in one namespace, several, or all."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os

from pgwork.durations import parse_duration
from pgwork.errors import PgworkError
from pgwork.validation import check_int, parse_whole

MAX_TICK_SECONDS = 3600.0
MAX_PRIORITY = 1_000_000_000


class OperatorUsageError(PgworkError):
    pass


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    text = "run the JobQueue operator: owns worker Deployments and CronJobs, scales on backlog"
    p = subparsers.add_parser("operator", help=text, description=text)
    scope = p.add_mutually_exclusive_group()
    scope.add_argument(
        "--namespace",
        action="append",
        help="watch this namespace (repeatable; globs like team-* allowed); default: POD_NAMESPACE",
    )
    scope.add_argument("--all-namespaces", action="store_true", help="watch JobQueues in every namespace")
    p.add_argument("--metrics-port", default="8080", help="Prometheus /metrics port (0 turns it off)")
    p.add_argument(
        "--liveness",
        default="http://0.0.0.0:8081/healthz",
        help="kopf liveness endpoint URL (empty turns it off)",
    )
    p.add_argument(
        "--tick", default="1", help="timer wake-up, seconds or a duration up to 1h (per-queue polls follow spec)"
    )
    p.add_argument("--standalone", action="store_true", help="no peering (only for a single replica)")
    p.add_argument("--peering", default="pgwork", help="peering object name shared by the operator's replicas")
    p.add_argument("--priority", help="peering priority, a whole number (default: random, so one replica is active)")
    p.set_defaults(func=cmd_operator)


def cmd_operator(args: argparse.Namespace) -> int:
    from pgwork.operator.handlers import OperatorOptions, run_operator

    namespaces: list[str] = list(args.namespace or [])
    if not namespaces and not args.all_namespaces:
        own = os.environ.get("POD_NAMESPACE")
        if not own:
            raise OperatorUsageError(
                "--namespace: none given and POD_NAMESPACE is unset; pass --namespace NS or --all-namespaces"
            )
        namespaces = [own]
    # Every number bounded before it is used (a 5000-digit port, a tick of 1e400 seconds).
    try:
        tick = parse_duration(args.tick, "--tick", MAX_TICK_SECONDS)
        port = check_int(parse_whole(args.metrics_port, "--metrics-port", "use 0..65535"), "--metrics-port", 0, 65535,
                         "use 0..65535")  # fmt: skip
        priority = None
        if args.priority is not None:
            fix = f"use -{MAX_PRIORITY}..{MAX_PRIORITY}"
            priority = check_int(parse_whole(args.priority, "--priority", fix), "--priority", -MAX_PRIORITY,
                                 MAX_PRIORITY, fix)  # fmt: skip
    except ValueError as exc:
        raise OperatorUsageError(str(exc)) from None
    if tick <= 0:
        raise OperatorUsageError("--tick: must be > 0 seconds, e.g. 1")
    options = OperatorOptions(
        namespaces=namespaces,
        clusterwide=bool(args.all_namespaces),
        metrics_port=port or None,
        tick_seconds=tick,
        standalone=args.standalone,
        peering_name=args.peering,
        priority=priority,
    )
    if not args.verbose:
        # kopf logs every timer call ("Timer ... succeeded") per JobQueue each tick; our own
        # decisions are logged by pgwork.operator and posted as events.
        logging.getLogger("kopf.objects").setLevel(logging.WARNING)
    asyncio.run(run_operator(options, liveness_endpoint=args.liveness or None))
    return 0
