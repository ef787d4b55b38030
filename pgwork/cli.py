"""The `pgwork` command. Queue commands live here; worker and operator register themselves from
their own modules so each stays small; the tools (bench, chaos, demo) are named here and loaded
only when their own subcommand runs."""

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

from pgwork import __version__, jobfile, tracing
from pgwork.cli_parser import DSN_HELP, CommandParser, SubcommandParser, parse_strictly
from pgwork.db import GRANT_PROFILES, Queue, grant, migrate
from pgwork.dsn import redact, resolve_dsn
from pgwork.durations import parse_age, parse_duration
from pgwork.errors import PgworkError
from pgwork.models import COUNTS, PruneProgress, Reclaimed, TypeStats
from pgwork.reaper import Reaper, ReaperConfig
from pgwork.tables import json_safe, render, visible
from pgwork.validation import parse_id, parse_job_types, parse_whole

# Modules that add subcommands: each has `register(subparsers) -> None`. A missing optional
# dependency (kopf for the operator) hides only that command.
EXTENSIONS = (
    "pgwork.worker.command",
    "pgwork.operator.command",
)

# The tools outside the core (pgwork/tools): subcommand -> (module, one-line help). The module is
# imported only when its subcommand runs (or shows its own --help); it has `configure(parser)`.
# So importing the CLI, as every worker process does, never loads a tool or registers its handlers.
TOOLS = {
    "bench": (
        "pgwork.tools.lab.command",
        "run the lab: claim strategies, held transactions, history, crash timeline, throughput, wake-up",
    ),
    "chaos": (
        "pgwork.tools.chaos.command",
        "run jobs on worker processes while killing workers, restarting a private PostgreSQL, cutting "
        "connections and pausing workers past their lease; then check nothing was lost or done twice",
    ),
    "demo": (
        "pgwork.tools.demo.command",
        "see pgwork work: invoices extracted by several workers, one killed mid-job (under a minute)",
    ),
}

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
    except RecursionError:
        raise UsageError("--payload: nested too deeply to read (flatten it; pgwork accepts 100 levels)") from None
    except ValueError as exc:  # the int-str digit limit: a number with thousands of digits
        raise UsageError(f"--payload: cannot be read ({str(exc).split(';')[0]}; pass big numbers as strings)") from None
    if not isinstance(value, dict):
        raise UsageError(
            f"--payload: must be a JSON object, got {type(value).__name__}; e.g. --payload '{{\"value\": 1}}'"
        )
    return value


def _ids(values: Sequence[str]) -> list[int]:
    return [parse_id(v, "ID") for v in values]


def _whole(text: str | None, field: str, fix: str) -> int | None:
    return None if text is None else parse_whole(text, field, fix)


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
    if args.from_file is not None:
        return _enqueue_file(args)
    if args.job_type is None:
        raise UsageError("TYPE: name the job type, e.g. pgwork enqueue ocr --payload '{}' (or use --from-file)")
    if args.batch_size is not None:
        raise UsageError("--batch-size: applies only with --from-file")
    payload = _json_object(jobfile.payload_argument(args.payload, sys.stdin))
    delay = _seconds(args.delay, "--delay") if args.delay is not None else None
    priority = _whole(args.priority, "--priority", "use 0..32767, lower runs first")
    max_attempts = _whole(args.max_attempts, "--max-attempts", "use 1..32767")
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
                priority=priority,
                delay=delay,
                max_attempts=max_attempts,
            )
    finally:
        tracing.shutdown(provider)
    print(job_id)
    return 0


def _enqueue_file(args: argparse.Namespace) -> int:
    """--from-file: check every line first (nothing is written if one is bad), then load in batches
    with a progress bar on a terminal and one summary line otherwise."""
    given = {
        "--payload": args.payload != "{}",
        "--key": args.key is not None,
        "--delay": args.delay is not None,
        "--priority": args.priority != "100",
        "--max-attempts": args.max_attempts != "5",
    }
    for flag, value in given.items():
        if value:
            raise UsageError(f"{flag}: each line of --from-file says its own; remove {flag}")
    batch = _whole(args.batch_size, "--batch-size", "use 1..1000000 jobs per transaction") or jobfile.DEFAULT_BATCH
    if not 1 <= batch <= 1_000_000:
        raise UsageError("--batch-size: use 1..1000000 jobs per transaction")
    started = time.monotonic()
    bar = sys.stderr.isatty()

    def show(done: int, total: int) -> None:
        print(
            f"\r{jobfile.progress_text(done, total, time.monotonic() - started)}", end="", file=sys.stderr, flush=True
        )

    with _queue(args) as q:
        found = jobfile.enqueue_file(
            q, Path(args.from_file), args.job_type, batch=batch, on_progress=show if bar else None
        )
    if bar:
        print(file=sys.stderr)
    took = time.monotonic() - started
    print(f"enqueued {found.jobs} jobs from {visible(args.from_file)} ({found.lines} lines) in {took:.1f}s")
    return 0


def _print_rows(rows: list[dict[str, Any]], as_json: bool, columns: Sequence[str] | None = None) -> None:
    if as_json:
        # Strict JSON (no NaN/Infinity) with every control character escaped by the encoder.
        print(json.dumps(json_safe(rows), default=str, indent=2, allow_nan=False))
    else:
        print(render(rows, columns))


# `pgwork stats` counts up to this many jobs per type and status unless --exact: enough to read
# a backlog, and the reading costs the same at ten million jobs.
STATS_CAP = 1000


def stats_rows(stats: Sequence[TypeStats], *, as_json: bool) -> list[dict[str, Any]]:
    """`pgwork stats` rows (pure). A count that reached the cap shows as `>=N` in the table; in
    JSON the counts stay numbers and `lower_bounds` names the ones that are "at least"."""
    rows = []
    for s in stats:
        row = dataclasses.asdict(s)
        cap = row.pop("cap")
        capped = s.lower_bounds()
        if as_json:
            row["lower_bounds"] = list(capped)
            row["cap"] = cap
        else:
            for name in COUNTS:
                if name in capped:
                    row[name] = f">={row[name]}"
        rows.append(row)
    return rows


def cmd_stats(args: argparse.Namespace) -> int:
    job_types = parse_job_types(args.job_types)
    with _queue(args) as q:
        stats = q.stats(job_types, cap=None if args.exact else STATS_CAP)
    _print_rows(stats_rows(stats, as_json=args.json), args.json)
    return 0


def cmd_running(args: argparse.Namespace) -> int:
    with _queue(args) as q:
        _print_rows([dataclasses.asdict(r) for r in q.running()], args.json)
    return 0


def cmd_retrying(args: argparse.Namespace) -> int:
    with _queue(args) as q:
        _print_rows([dataclasses.asdict(r) for r in q.retrying()], args.json)
    return 0


def cmd_dead(args: argparse.Namespace) -> int:
    with _queue(args) as q:
        _print_rows(
            [dataclasses.asdict(r) for r in q.dead(limit=_whole(args.limit, "--limit", "use 1..1000000") or 0)],
            args.json,
        )
    return 0


def cmd_retry(args: argparse.Namespace) -> int:
    ids = _ids(args.ids)
    max_attempts = _whole(args.max_attempts, "--max-attempts", "use 1..32767")
    with _queue(args) as q:
        done = q.retry(ids, max_attempts=max_attempts)
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


def _print_reclaimed(r: Reclaimed) -> None:
    print(
        f"reclaimed job {r.id} ({visible(r.job_type)}) from {visible(r.previous_owner)}, "
        f"{r.overdue_seconds:.1f}s overdue, attempt {r.attempt_count} -> {r.status}",
        flush=True,
    )


def cmd_reap(args: argparse.Namespace) -> int:
    loop_for = _seconds(args.loop_for, "--loop-for")
    every = _seconds(args.every, "--every")
    if every <= 0:
        raise UsageError("--every: must be > 0 seconds, e.g. 10s")
    with Reaper(lambda: _queue(args), ReaperConfig(every=every, loop_for=loop_for), on_reclaimed=_print_reclaimed) as r:
        r.loop()
    return 0


def prune_statuses(status: Sequence[str] | None, include_dead: bool) -> list[str]:
    """Which statuses `pgwork prune` deletes. Dead jobs are the ones someone still has to look
    at (their last_error is the only record of what went wrong), so only an explicit
    --include-dead deletes them."""
    chosen = list(dict.fromkeys(status or ["succeeded", "cancelled", *(["dead"] if include_dead else [])]))
    if "dead" in chosen and not include_dead:
        raise UsageError(
            "--status dead: pruning deletes dead jobs and their last_error for good; add --include-dead to mean it"
        )
    return chosen


def cmd_prune(args: argparse.Namespace) -> int:
    try:
        age = parse_age(args.older_than, "--older-than")
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    statuses = prune_statuses(args.status, args.include_dead)
    batch = _whole(args.batch_size, "--batch-size", "use 1..100000 rows per transaction") or 10_000
    longest = 0.0
    shown_at = time.monotonic()

    def progress(p: PruneProgress) -> None:
        # One line a second at most: a CronJob's log shows the prune moving without a line per batch.
        nonlocal longest, shown_at
        longest = max(longest, p.seconds)
        if time.monotonic() - shown_at >= 1.0:
            shown_at = time.monotonic()
            print(f"pruning: {p.total} deleted so far ({p.status}), longest batch {longest:.2f}s", flush=True)

    with _queue(args) as q:
        deleted = q.prune(timedelta(seconds=age), statuses=statuses, batch=batch, on_progress=progress)
    print(
        f"deleted {deleted} {'/'.join(statuses)} jobs older than {visible(args.older_than.strip())} "
        f"(batches of {batch}, longest {longest:.2f}s)"
    )
    return 0


def build_parser(tool: str | None = None) -> argparse.ArgumentParser:
    """The whole parser; `tool` (a name in TOOLS) is loaded with its options, the others are named only."""
    parser = CommandParser(prog="pgwork", description=__doc__)
    parser.add_argument("--version", action="version", version=f"pgwork {__version__}")
    parser.add_argument("--dsn", help=DSN_HELP)
    parser.add_argument("-v", "--verbose", action="store_true", help="log at debug level")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=SubcommandParser)

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
    p = add("enqueue", cmd_enqueue, "add one job and print its id, or many from a JSON Lines file")
    p.add_argument("job_type", metavar="TYPE", nargs="?", help="the job type (with --from-file: for lines naming none)")
    p.add_argument(
        "--payload", default="{}", help="JSON object, @FILE to read it from a file, - for stdin (default {})"
    )
    p.add_argument("--key", help="idempotency key (default: derived from type and payload)")
    p.add_argument("--priority", default="100", help="0..32767, lower runs first (default 100)")
    p.add_argument("--delay", help="run no sooner than this from now: 30, 30s, 5m")
    p.add_argument("--max-attempts", default="5", help="attempts before the job goes dead (default 5)")
    p.add_argument(
        "--from-file",
        metavar="FILE",
        help="enqueue one job per line of a JSON Lines file (fields as NewJob); every line is checked before any is "
        "written",
    )
    p.add_argument("--batch-size", help=f"with --from-file: jobs per transaction (default {jobfile.DEFAULT_BATCH})")
    for name, func, text in (
        ("stats", cmd_stats, "backlog per job type: ready, scheduled, running, dead"),
        ("running", cmd_running, "jobs in flight: owner, lease left, heartbeat age"),
        ("retrying", cmd_retrying, "pending jobs that have failed before"),
        ("dead", cmd_dead, "jobs that ran out of attempts, with their last error"),
    ):
        p = add(name, func, text)
        p.add_argument("--json", action="store_true", help="print JSON")
        if name == "stats":
            p.add_argument(
                "--job-types", nargs="+", metavar="A,B", help="only these types, each shown even with no job (a,b,c)"
            )
            p.add_argument(
                "--exact",
                action="store_true",
                help=f"count every job (reads one index entry per job); by default counts stop at {STATS_CAP} "
                f"and show as >={STATS_CAP}",
            )
        if name == "dead":
            p.add_argument("--limit", default="100", help="show at most this many (default 100)")
    p = add("retry", cmd_retry, "requeue dead or cancelled jobs now")
    p.add_argument("ids", nargs="+", metavar="ID")
    p.add_argument("--max-attempts", help="raise the job's attempt budget to this")
    p = add("cancel", cmd_cancel, "cancel pending jobs; ask running ones to stop at their next heartbeat")
    p.add_argument("ids", nargs="+", metavar="ID")
    p = add("reap", cmd_reap, "return jobs whose lease expired to pending (what the reaper CronJob runs)")
    p.add_argument("--loop-for", default="0", help="keep reaping for this long, for finer than a minute")
    p.add_argument("--every", default="10s", help="pause between rounds when looping")
    p = add("prune", cmd_prune, "delete succeeded and cancelled history older than an age")
    p.add_argument("--older-than", required=True, help="age with a unit, such as 30d, 12h (a bare number is refused)")
    p.add_argument(
        "--status",
        action="append",
        choices=["succeeded", "cancelled", "dead"],
        help="only these statuses (repeatable; default succeeded and cancelled)",
    )
    p.add_argument(
        "--include-dead", action="store_true", help="also delete dead jobs and their last_error (never by default)"
    )
    p.add_argument("--batch-size", help="rows per transaction, each batch committed on its own (default 10000)")

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
    for name, (module_name, help_text) in TOOLS.items():
        if name == tool:
            importlib.import_module(module_name).configure(sub.add_parser(name, help=help_text, description=help_text))
        else:
            # Named only: any arguments pass through to the second parse, once the tool is loaded.
            sub.add_parser(name, help=help_text, add_help=False).set_defaults(func=None)
    return parser


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    """Parse once with the tools named only; if a tool's subcommand was chosen, load it and parse again."""
    parser = build_parser()
    args, _ = parser.parse_known_args(argv)
    if args.command in TOOLS:
        parser = build_parser(args.command)
    return parse_strictly(parser, argv)


def _first_line(exc: BaseException) -> str:
    text = redact(str(exc)).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse(argv)
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
