"""The `pgwork` command. Queue commands live here; worker, demo, operator, bench and chaos
register themselves from their own modules so each stays small."""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import importlib.util
import json
import logging
import sys
import time
from collections.abc import Callable, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg

from pgwork import __version__, tracing
from pgwork.dsn import redact, resolve_dsn
from pgwork.durations import parse_duration
from pgwork.errors import PgworkError
from pgwork.queue import GRANT_PROFILES, Queue, grant, migrate
from pgwork.tables import render

# Modules that add subcommands: each has `register(subparsers) -> None`. A missing optional
# dependency (kopf for the operator) hides only that command.
EXTENSIONS = (
    "pgwork.worker.command",
    "pgwork.demo.command",
    "pgwork.operator.command",
    "pgwork.lab.command",
    "pgwork.chaos.command",
)

Handler = Callable[[argparse.Namespace], int]


class UsageError(PgworkError):
    pass


def _json_object(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(
            f"--payload: not valid JSON ({exc.msg} at position {exc.pos}); "
            "quote it for the shell, e.g. --payload '{\"doc\": 1}'"
        ) from None
    if not isinstance(value, dict):
        raise UsageError(
            f"--payload: must be a JSON object, got {type(value).__name__}; e.g. --payload '{{\"value\": 1}}'"
        )
    return value


def _ids(values: Sequence[str]) -> list[int]:
    ids = []
    for v in values:
        if not v.isdigit() or int(v) < 1:
            raise UsageError(f"ID: {v!r} is not a job id (a positive whole number)")
        ids.append(int(v))
    return ids


def _seconds(text: str, field: str) -> float:
    try:
        return parse_duration(text, field)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def _queue(args: argparse.Namespace) -> Queue:
    return Queue(resolve_dsn(args.dsn), pool_size=1)


def cmd_migrate(args: argparse.Namespace) -> int:
    applied = migrate(resolve_dsn(args.dsn))
    print(f"applied migrations {applied}" if applied else "already up to date")
    return 0


def cmd_grant(args: argparse.Namespace) -> int:
    applied = grant(resolve_dsn(args.dsn), args.role, args.profile)
    print(f"granted {args.role} the {' + '.join(applied)} privileges on schema pgwork")
    return 0


def cmd_enqueue(args: argparse.Namespace) -> int:
    payload = _json_object(args.payload)
    delay = _seconds(args.delay, "--delay") if args.delay is not None else None
    provider = tracing.configure_from_env()
    try:
        with _queue(args) as q:
            # The producer's trace context rides on the row, so the worker's span joins the trace.
            job_id = tracing.enqueue(
                q,
                args.job_type,
                payload,
                tracer_provider=provider,
                key=args.key,
                priority=args.priority,
                delay=delay,
                max_attempts=args.max_attempts,
            )
    finally:
        tracing.shutdown(provider)
    print(job_id)
    return 0


def _print_rows(rows: list[dict[str, Any]], as_json: bool, columns: Sequence[str] | None = None) -> None:
    if as_json:
        print(json.dumps(rows, default=str, indent=2))
    else:
        print(render(rows, columns))


def cmd_stats(args: argparse.Namespace) -> int:
    with _queue(args) as q:
        rows = [dataclasses.asdict(s) for s in q.stats(args.job_types or None)]
    _print_rows(rows, args.json)
    return 0


def cmd_running(args: argparse.Namespace) -> int:
    with _queue(args) as q:
        _print_rows(q.running(), args.json)
    return 0


def cmd_retrying(args: argparse.Namespace) -> int:
    with _queue(args) as q:
        _print_rows(q.retrying(), args.json)
    return 0


def cmd_dead(args: argparse.Namespace) -> int:
    with _queue(args) as q:
        _print_rows(q.dead(limit=args.limit), args.json)
    return 0


def cmd_retry(args: argparse.Namespace) -> int:
    ids = _ids(args.ids)
    with _queue(args) as q:
        done = q.retry(ids, max_attempts=args.max_attempts)
    skipped = sorted(set(ids) - set(done))
    print(f"requeued: {done or 'none'}" + (f"; not dead or cancelled, left alone: {skipped}" if skipped else ""))
    return 0 if not skipped else 1


def cmd_cancel(args: argparse.Namespace) -> int:
    with _queue(args) as q:
        report = q.cancel(_ids(args.ids))
    print(
        f"cancelled: {report.cancelled or 'none'}; cancellation requested (running): "
        f"{report.requested or 'none'}; already finished or unknown: {report.not_cancellable or 'none'}"
    )
    return 0 if not report.not_cancellable else 1


def cmd_reap(args: argparse.Namespace) -> int:
    loop_for = _seconds(args.loop_for, "--loop-for")
    every = _seconds(args.every, "--every")
    if every <= 0:
        raise UsageError("--every: must be > 0 seconds, e.g. 10s")
    deadline = time.monotonic() + loop_for
    with _queue(args) as q:
        while True:
            for r in q.reap():
                print(
                    f"reclaimed job {r.id} ({r.job_type}) from {r.previous_owner}, "
                    f"{r.overdue_seconds:.1f}s overdue, attempt {r.attempt_count} -> {r.status}",
                    flush=True,
                )
            if time.monotonic() + every > deadline:
                return 0
            time.sleep(every)


def cmd_prune(args: argparse.Namespace) -> int:
    age = _seconds(args.older_than, "--older-than")
    statuses = args.status or ["succeeded", "cancelled", "dead"]
    with _queue(args) as q:
        deleted = q.prune(timedelta(seconds=age), statuses=statuses)
    print(f"deleted {deleted} finished jobs older than {args.older_than}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="pgwork", description=__doc__)
    parser.add_argument("--version", action="version", version=f"pgwork {__version__}")
    parser.add_argument("--dsn", help="connection string (default: DATABASE_URL, then libpq PG* variables)")
    parser.add_argument("-v", "--verbose", action="store_true", help="log at debug level")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def add(name: str, func: Handler, help_text: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.set_defaults(func=func)
        return p

    add("migrate", cmd_migrate, "create or upgrade the pgwork schema (safe to run from many pods at once)")
    p = add("grant", cmd_grant, "give an existing role least-privilege access (run as the migrating role)")
    p.add_argument("role", metavar="ROLE")
    p.add_argument(
        "--profile",
        choices=GRANT_PROFILES,
        default="worker",
        help="reader (counts, ages, errors; no payloads), producer (+ enqueue), worker (+ claim, heartbeat, "
        "finish), reaper (reader + reap, prune), maintainer (reaper + retry, cancel); sets exactly that profile",
    )
    p = add("enqueue", cmd_enqueue, "add one job; prints its id")
    p.add_argument("job_type", metavar="TYPE")
    p.add_argument("--payload", default="{}", help="JSON object (default {})")
    p.add_argument("--key", help="idempotency key (default: derived from type and payload)")
    p.add_argument("--priority", type=int, default=100, help="0..32767, lower runs first (default 100)")
    p.add_argument("--delay", help="run no sooner than this from now: 30, 30s, 5m")
    p.add_argument("--max-attempts", type=int, default=5)
    for name, func, text in (
        ("stats", cmd_stats, "backlog per job type: ready, scheduled, running, dead"),
        ("running", cmd_running, "jobs in flight: owner, lease left, heartbeat age"),
        ("retrying", cmd_retrying, "pending jobs that have failed before"),
        ("dead", cmd_dead, "jobs that ran out of attempts, with their last error"),
    ):
        p = add(name, func, text)
        p.add_argument("--json", action="store_true", help="print JSON")
        if name == "stats":
            p.add_argument("--job-types", nargs="*", help="only these types")
        if name == "dead":
            p.add_argument("--limit", type=int, default=100)
    p = add("retry", cmd_retry, "requeue dead or cancelled jobs now")
    p.add_argument("ids", nargs="+", metavar="ID")
    p.add_argument("--max-attempts", type=int, help="raise the job's attempt budget to this")
    p = add("cancel", cmd_cancel, "cancel pending jobs; ask running ones to stop at their next heartbeat")
    p.add_argument("ids", nargs="+", metavar="ID")
    p = add("reap", cmd_reap, "return jobs whose lease expired to pending (what the reaper CronJob runs)")
    p.add_argument("--loop-for", default="0", help="keep reaping for this long, for finer than a minute")
    p.add_argument("--every", default="10s", help="pause between rounds when looping")
    p = add("prune", cmd_prune, "delete finished history older than an age")
    p.add_argument("--older-than", required=True, help="age such as 7d, 12h")
    p.add_argument(
        "--status",
        action="append",
        choices=["succeeded", "cancelled", "dead"],
        help="only these statuses (repeatable; default all three)",
    )

    own = Path(__file__).resolve().parent
    for module_name in EXTENSIONS:
        try:
            # Only this package's own extensions: another pgwork installed alongside (an editable
            # install of another checkout) must not fill in one this checkout lacks.
            spec = importlib.util.find_spec(module_name)
            if spec is None or spec.origin is None or not Path(spec.origin).resolve().is_relative_to(own):
                continue
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            # Only the extension itself or an optional dependency may be missing.
            optional = {"kopf", "kubernetes", "yaml"}
            if exc.name and (module_name.startswith(exc.name) or exc.name.split(".")[0] in optional):
                continue
            raise
        module.register(sub)
    return parser


def _first_line(exc: BaseException) -> str:
    text = redact(str(exc)).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    func: Handler = args.func
    try:
        return func(args)
    except PgworkError as exc:
        print(f"pgwork {args.command}: {redact(str(exc))}", file=sys.stderr)
        return 2
    except psycopg.errors.InsufficientPrivilege as exc:
        print(
            f"pgwork {args.command}: {_first_line(exc)}; the connecting role lacks this privilege (run "
            "`pgwork migrate` as the role that owns the pgwork schema, and give other roles a profile with "
            f"`pgwork grant ROLE --profile {'|'.join(GRANT_PROFILES)}`)",
            file=sys.stderr,
        )
        return 2
    except psycopg.Error as exc:
        print(f"pgwork {args.command}: database error: {_first_line(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
