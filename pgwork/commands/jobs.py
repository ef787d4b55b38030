"""`pgwork enqueue`, `retry` and `cancel`: putting jobs in and moving them by hand."""

from __future__ import annotations

import argparse
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import psycopg

from pgwork import jobfile, tracing
from pgwork.commands.common import UsageError, adder, bounded, job_ids, json_object, open_queue, seconds, whole
from pgwork.db import Queue
from pgwork.durations import format_duration
from pgwork.models import NewJob
from pgwork.tables import visible
from pgwork.validation import DEFAULT_MAX_PAYLOAD_BYTES, check_timeout


def cmd_enqueue(args: argparse.Namespace) -> int:
    if args.from_file is not None:
        return _enqueue_file(args)
    if args.job_type is None:
        raise UsageError("TYPE: name the job type, e.g. pgwork enqueue ocr --payload '{}' (or use --from-file)")
    if args.batch_size is not None:
        raise UsageError("--batch-size: applies only with --from-file")
    payload = json_object(jobfile.payload_argument(args.payload, sys.stdin.buffer, DEFAULT_MAX_PAYLOAD_BYTES))
    delay = seconds(args.delay, "--delay") if args.delay is not None else None
    priority = whole(args.priority, "--priority", "use 0..32767, lower runs first")
    max_attempts = whole(args.max_attempts, "--max-attempts", "use 1..32767")
    timeout = check_timeout(args.timeout, "--timeout")
    job = NewJob(
        args.job_type,
        payload,
        key=args.key,
        priority=100 if priority is None else priority,
        delay=delay,
        max_attempts=5 if max_attempts is None else max_attempts,
        timeout=timeout,
        unique=args.unique,
    )
    provider = tracing.configure_from_env()
    try:
        with open_queue(args) as q:
            # The producer's trace context rides on the row, so the worker's span joins the trace.
            found = tracing.enqueue_job(q, job, tracer_provider=provider)
            taken = _recently_taken(q, args.job_type)
    finally:
        tracing.shutdown(provider)
    if not found.created:
        print(
            f"pgwork enqueue: not added: its key already has job {found.id} ({found.status}); --unique skips a key "
            "with a pending, running or succeeded job",
            file=sys.stderr,
        )
    if taken is not None and taken.get(args.job_type) is None:
        print(orphan_note(args.job_type), file=sys.stderr)
    print(found.id)
    return 0


# How far back "a worker took this type recently" looks (pgwork.recently_taken).
TAKEN_WITHIN = 600.0


def _recently_taken(q: Queue, job_type: str) -> dict[str, datetime | None] | None:
    """The note's reading; None (no note) for a role granted INSERT by hand without the reader
    profile: the job is in, and a warning must not turn that into a failure."""
    try:
        return q.recently_taken([job_type], within=TAKEN_WITHIN)
    except psycopg.errors.InsufficientPrivilege:
        return None


def orphan_note(job_type: str) -> str:
    """The warning for a type no worker took lately (pure): the job waits, it is not refused."""
    return (
        f"pgwork enqueue: note: no worker has taken a {visible(job_type)!r} job in the last "
        f"{format_duration(TAKEN_WITHIN)}; it waits until one runs with that type (pgwork worker APP "
        f"--job-types {visible(job_type)}, or a JobQueue listing it)"
    )


def _enqueue_file(args: argparse.Namespace) -> int:
    """--from-file: check every line first (nothing is written if one is bad), then load in batches
    with a progress bar on a terminal and one summary line otherwise."""
    given = {
        "--payload": args.payload != "{}",
        "--key": args.key is not None,
        "--delay": args.delay is not None,
        "--priority": args.priority != "100",
        "--max-attempts": args.max_attempts != "5",
        "--timeout": args.timeout is not None,
        "--unique": args.unique,
    }
    for flag, value in given.items():
        if value:
            raise UsageError(f"{flag}: each line of --from-file says its own; remove {flag}")
    batch = bounded(args.batch_size, "--batch-size", 1, jobfile.MAX_BATCH, jobfile.DEFAULT_BATCH)
    started = time.monotonic()
    bar = sys.stderr.isatty()

    def show(done: int, total: int) -> None:
        print(
            f"\r{jobfile.progress_text(done, total, time.monotonic() - started)}", end="", file=sys.stderr, flush=True
        )

    with open_queue(args) as q:
        found = jobfile.enqueue_file(
            q, Path(args.from_file), args.job_type, batch=batch, on_progress=show if bar else None
        )
    if bar:
        print(file=sys.stderr)
    took = time.monotonic() - started
    skipped = f"; {found.skipped} unique jobs were there already, not added" if found.skipped else ""
    print(f"enqueued {found.jobs} jobs from {visible(args.from_file)} ({found.lines} lines) in {took:.1f}s{skipped}")
    return 0


def cmd_retry(args: argparse.Namespace) -> int:
    ids = job_ids(args.ids)
    max_attempts = whole(args.max_attempts, "--max-attempts", "use 1..32767")
    with open_queue(args) as q:
        done = q.retry(ids, max_attempts=max_attempts)
    skipped = sorted(set(ids) - set(done))
    print(f"requeued: {done or 'none'}" + (f"; not dead or cancelled, left alone: {skipped}" if skipped else ""))
    return 0 if not skipped else 1


def cmd_cancel(args: argparse.Namespace) -> int:
    with open_queue(args) as q:
        report = q.cancel(job_ids(args.ids))
    print(
        f"cancelled: {report.cancelled or 'none'}; cancellation requested (running): "
        f"{report.requested or 'none'}; already finished or unknown: {report.not_cancellable or 'none'}"
    )
    return 0 if not report.not_cancellable else 1


def register(sub: Any) -> None:
    add = adder(sub)
    p = add("enqueue", cmd_enqueue, "add one job and print its id, or many from a JSON Lines file")
    p.add_argument("job_type", metavar="TYPE", nargs="?", help="the job type (with --from-file: for lines naming none)")
    p.add_argument(
        "--payload", default="{}", help="JSON object, @FILE to read it from a file, - for stdin (default {})"
    )
    p.add_argument("--key", help="idempotency key (default: derived from type and payload)")
    p.add_argument("--priority", default="100", help="0..32767, lower runs first (default 100)")
    p.add_argument("--delay", help="run no sooner than this from now: 30, 30s, 5m")
    p.add_argument("--max-attempts", default="5", help="attempts before the job goes dead (default 5)")
    p.add_argument("--timeout", help="hard timeout for this job, overriding its handler's: 30s, 10m, 2h (at most 7d)")
    p.add_argument(
        "--unique",
        action="store_true",
        help="add nothing if the key already has a pending, running or succeeded unique job; print that job's id",
    )
    p.add_argument(
        "--from-file",
        metavar="FILE",
        help="enqueue one job per line of a JSON Lines file (fields as NewJob); every line is checked before any is "
        "written",
    )
    p.add_argument("--batch-size", help=f"with --from-file: jobs per transaction (default {jobfile.DEFAULT_BATCH})")
    p = add("retry", cmd_retry, "requeue dead or cancelled jobs now")
    p.add_argument("ids", nargs="+", metavar="ID")
    p.add_argument("--max-attempts", help="raise the job's attempt budget to this")
    p = add("cancel", cmd_cancel, "cancel pending jobs; ask running ones to stop at their next heartbeat")
    p.add_argument("ids", nargs="+", metavar="ID")
