"""Bulk enqueue: many validated jobs through COPY into a staging table, then one INSERT.

A backfill of millions of jobs through one INSERT ... unnest statement per batch pays for
building and parsing huge array parameters; COPY streams rows instead, and validation in Python
overlaps with the server's work. The staging table is the session's own temporary table, so the
producer needs no right beyond its column-limited INSERT on pgwork.jobs (and TEMP, which PUBLIC
holds by default); the INSERT names only the columns that say what a job is, so whatever the
input held, a new row starts pending with no attempts and no lease. Everything runs in one
transaction (a savepoint inside the caller's): one bad job, or any failure, writes none.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime, timedelta

from psycopg import Copy

from pgwork.db import statements
from pgwork.db.connect import AnyConnection
from pgwork.errors import InvalidArgument
from pgwork.models import NewJob
from pgwork.validation import JobRow, validate

# Below this many jobs one INSERT ... unnest is cheaper than creating a staging table.
BULK_THRESHOLD = 1000
# Rows per write to the COPY stream (and per progress report).
CHUNK = 5000

Progress = Callable[[int], None]

# COPY's text format: backslash, tab, newline and carriage return must be escaped in a value.
_COPY_ESCAPES = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})


def copy_text(value: str) -> str:
    """`value` as one field of COPY's text format (pure)."""
    if "\\" in value or "\t" in value or "\n" in value or "\r" in value:
        return value.translate(_COPY_ESCAPES)
    return value  # the common case, checked faster than translate copies


def copy_line(ordinal: int, row: JobRow) -> str:
    if row.unique or row.after:
        raise _unique_in_bulk(ordinal, "after" if row.after else "unique")
    """One staging row in COPY's text format (pure). JSON text never holds a raw tab or newline,
    but it may hold backslashes, which COPY would read as escapes."""
    available = "\\N" if row.available_at is None else row.available_at.isoformat()
    return (
        f"{ordinal}\t{copy_text(row.job_type)}\t{copy_text(row.payload_json)}\t{row.priority}\t"
        f"{row.max_attempts}\t{available}\t{row.delay!r}\t{copy_text(row.key)}\t{_trace(row)}\t{_timeout(row)}\n"
    )


def load_line(row: JobRow, clock: Clock) -> str:
    if row.unique or row.after:
        raise _unique_in_bulk(None, "after" if row.after else "unique")
    """One pgwork.jobs row in COPY's text format (pure): available_at resolved against the
    transaction's clock, as the INSERT of `enqueue` resolves it."""
    available = row.available_at.isoformat() if row.available_at is not None else clock.after(row.delay)
    return (
        f"{copy_text(row.job_type)}\t{copy_text(row.payload_json)}\t{row.priority}\t{row.max_attempts}\t"
        f"{available}\t{copy_text(row.key)}\t{_trace(row)}\t{_timeout(row)}\n"
    )


class Clock:
    """`now + delay` as COPY text, remembered per delay: a backfill's jobs share a few delays (most
    none), and formatting an instant costs more than the rest of the line."""

    def __init__(self, now: datetime) -> None:
        self.now = now
        self._text: dict[float, str] = {}

    def after(self, delay: float) -> str:
        text = self._text.get(delay)
        if text is None:
            text = (self.now + timedelta(seconds=delay)).isoformat()
            if len(self._text) < 10_000:
                self._text[delay] = text
        return text


def _unique_in_bulk(ordinal: int | None, field: str = "unique") -> InvalidArgument:
    # COPY cannot skip a row whose key is taken (the per-job path, migration 16, can), nor wire
    # parents (enqueue_many sends jobs with `after` through enqueue_after, migration 22).
    where = "" if ordinal is None else f" (job {ordinal} of the batch, from 0)"
    what = "unique jobs" if field == "unique" else "jobs with parents"
    return InvalidArgument(
        field,
        f"is not supported by the COPY path{where}",
        f"enqueue {what} at most {BULK_THRESHOLD} per call with enqueue_many (not load_jobs)",
    )


def _trace(row: JobRow) -> str:
    return copy_text(json.dumps(row.trace_context, ensure_ascii=False)) if row.trace_context else "{}"


def _timeout(row: JobRow) -> str:
    return "\\N" if row.timeout is None else repr(row.timeout)


def validated(jobs: Iterable[NewJob], max_payload_bytes: int) -> Iterator[JobRow]:
    """Each job validated, in order; a bad one raises InvalidArgument naming its field and its
    place in the batch."""
    for i, job in enumerate(jobs):
        try:
            yield validate(job, max_payload_bytes)
        except InvalidArgument as exc:
            raise InvalidArgument(exc.field, f"{exc.problem} (job {i} of the batch, from 0)", exc.fix) from None


def copy_enqueue(
    conn: AnyConnection,
    rows: Iterable[JobRow],
    *,
    now: datetime | None = None,
    on_progress: Progress | None = None,
) -> list[int]:
    """Stage `rows` with COPY and insert them in one statement; returns the new ids in input order.
    Runs in a transaction of its own, or a savepoint of the caller's when one is open."""
    with conn.transaction(), conn.cursor() as cur:
        statements.execute(conn, "enqueue_stage_create")
        with statements.copy(cur, "enqueue_stage_copy") as copy:
            written = _stream(copy, (copy_line(i, row) for i, row in enumerate(rows)), on_progress)
        ids = statements.column(conn, "enqueue_stage_insert", {"now": now})
        statements.execute(conn, "enqueue_stage_drop")
    _report(on_progress, written)
    return ids


def copy_load(
    conn: AnyConnection,
    rows: Iterable[JobRow],
    *,
    now: datetime | None = None,
    on_progress: Progress | None = None,
) -> int:
    """COPY `rows` straight into pgwork.jobs; returns how many. Same transaction rules."""
    with conn.transaction(), conn.cursor() as cur:
        clock = Clock(statements.scalar(conn, "load_clock", {"now": now}))
        with statements.copy(cur, "load_copy") as copy:
            written = _stream(copy, (load_line(row, clock) for row in rows), on_progress)
    _report(on_progress, written)
    return written


def _stream(copy: Copy, lines: Iterable[str], on_progress: Progress | None) -> int:
    written = 0
    for chunk in _batched(lines):
        copy.write("".join(chunk))
        written += len(chunk)
        _report(on_progress, written)
    return written


def _batched(lines: Iterable[str]) -> Iterator[tuple[str, ...]]:
    # itertools.batched is Python 3.12; pgwork supports 3.11.
    iterator = iter(lines)
    while chunk := tuple(itertools.islice(iterator, CHUNK)):
        yield chunk


def _report(on_progress: Progress | None, done: int) -> None:
    if on_progress is not None:
        on_progress(done)
