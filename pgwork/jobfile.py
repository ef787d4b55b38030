"""Jobs from a JSON Lines file (`pgwork enqueue --from-file`): one JSON object per line.

A line names the fields of `NewJob` (job_type, payload, key, priority, delay, available_at,
max_attempts, trace_context, timeout, unique) and nothing else. A field pgwork itself sets (status,
attempt_count, the lease...) is refused, not ignored: a file that tries to start a job as running or with
attempts used is wrong about what it loads, and saying so beats loading something else. Every
error names the line, the field and the fix. Parsing and checking are pure; `load` writes.
"""

from __future__ import annotations

import difflib
import itertools
import json
import tempfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import IO, Any, BinaryIO

from pgwork.db import Queue
from pgwork.durations import parse_duration
from pgwork.errors import InvalidArgument
from pgwork.models import NewJob
from pgwork.validation import validate

FIELDS = (
    "job_type",
    "payload",
    "key",
    "priority",
    "delay",
    "available_at",
    "max_attempts",
    "trace_context",
    "timeout",
    "unique",
)
# Columns the job's life sets; a producer's row never carries them (migration 0002's producer
# profile cannot write them either).
SET_BY_PGWORK = frozenset(
    {
        "id",
        "status",
        "attempt_count",
        "created_at",
        "started_at",
        "completed_at",
        "lease_owner",
        "lease_token",
        "lease_expires_at",
        "heartbeat_at",
        "cancel_requested_at",
        "last_error",
    }
)
DEFAULT_BATCH = 10_000
# Unique jobs go through Queue.enqueue_outcomes, which takes at most this many per call
# (pgwork.db.bulk.BULK_THRESHOLD).
UNIQUE_SLICE = 1000
MAX_BATCH = 1_000_000
# A line (or a --payload read from a file or stdin) holds a payload of at most the payload limit,
# which JSON escapes (\\u00e9) may spell up to six times longer, and a few other fields: it is read
# no further than this, so `--from-file /dev/zero` is one error, not a process grown until it dies.
LINE_MARGIN = 64 * 1024


def max_line_bytes(max_payload_bytes: int) -> int:
    return 6 * max_payload_bytes + LINE_MARGIN


class BadLine(InvalidArgument):
    """A line of the file cannot be a job; `line` is its 1-based number."""

    def __init__(self, line: int, field: str, problem: str, fix: str) -> None:
        self.line = line
        super().__init__(f"line {line}: {field}", problem, fix)


def parse_line(text: str, line: int, default_type: str | None = None) -> NewJob | None:
    """The job on one line, None for a blank line, or BadLine (pure)."""
    if not text.strip():
        return None
    try:
        value = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        where = f" ({exc.msg} at column {exc.colno})" if isinstance(exc, json.JSONDecodeError) else ""
        fix = 'write one object per line, e.g. {"job_type": "ocr"}'
        raise BadLine(line, "line", f"is not valid JSON{where}", fix) from None
    except ValueError as exc:  # the int-str digit limit
        raise BadLine(
            line, "line", f"cannot be read ({str(exc).split(';')[0]})", "pass big numbers as strings"
        ) from None
    if not isinstance(value, dict):
        raise BadLine(line, "line", f"is a JSON {type(value).__name__}, not an object", 'e.g. {"job_type": "ocr"}')
    for name in value:
        if name in SET_BY_PGWORK:
            raise BadLine(
                line,
                name,
                "is set by pgwork, not by the producer (every new job starts pending, with no attempts and no lease)",
                f"remove {name!r} from the line",
            )
        if name not in FIELDS:
            near = difflib.get_close_matches(name, FIELDS, n=1)
            hint = f"did you mean {near[0]!r}?" if near else f"use only {', '.join(FIELDS)}"
            raise BadLine(line, name, "is not a job field", hint)
    job_type = value.get("job_type", default_type)
    if job_type is None:
        raise BadLine(line, "job_type", "is missing", "add it, or give TYPE on the command line as the default")
    return NewJob(
        job_type=job_type,
        payload=value.get("payload", {}),
        key=value.get("key"),
        priority=value.get("priority", 100),
        delay=_delay(value.get("delay"), line),
        available_at=_instant(value.get("available_at"), line),
        max_attempts=value.get("max_attempts", 5),
        trace_context=value.get("trace_context", {}),
        timeout=value.get("timeout"),
        unique=value.get("unique", False),
    )


def _delay(value: Any, line: int) -> Any:
    if not isinstance(value, str):
        return value  # a number (or a wrong type, which validate names)
    try:
        return parse_duration(value, "delay")
    except ValueError as exc:
        raise BadLine(
            line, "delay", str(exc).removeprefix("delay: "), "give seconds or a duration such as 30s"
        ) from None


def _instant(value: Any, line: int) -> datetime | None:
    if value is None:
        return None
    fix = "give an ISO 8601 time with a zone, e.g. 2030-01-01T00:00:00Z"
    if not isinstance(value, str):
        raise BadLine(line, "available_at", f"must be a string, got {type(value).__name__}", fix)
    try:
        instant = datetime.fromisoformat(value)
    except ValueError:
        raise BadLine(line, "available_at", f"{value[:40]!r} is not an ISO 8601 time", fix) from None
    if instant.tzinfo is None:
        raise BadLine(line, "available_at", "has no time zone", fix)
    return instant


def jobs_of(
    lines: Iterable[str], default_type: str | None = None, max_payload_bytes: int | None = None
) -> Iterator[NewJob]:
    """The jobs of a file's lines, in order, each checked as `enqueue` checks it (with
    `max_payload_bytes`); the first bad line raises BadLine (pure but for reading `lines`)."""
    for number, text in enumerate(lines, start=1):
        job = parse_line(text, number, default_type)
        if job is None:
            continue
        if max_payload_bytes is not None:
            try:
                validate(job, max_payload_bytes)
            except InvalidArgument as exc:
                raise BadLine(number, exc.field, exc.problem, exc.fix) from None
        yield job


@dataclass(frozen=True)
class Loaded:
    jobs: int
    lines: int
    # Unique jobs whose key already had a job: not added (counted in `jobs`).
    skipped: int = 0


def check(lines: Iterable[str], default_type: str | None, max_payload_bytes: int) -> Loaded:
    """Read the whole file without writing: how many jobs and lines, or the first BadLine."""
    counted = 0
    last = 0

    def numbered() -> Iterator[str]:
        nonlocal last
        for last, text in enumerate(lines, start=1):  # noqa: B007 - `last` is read after the loop
            yield text

    for _ in jobs_of(numbered(), default_type, max_payload_bytes):
        counted += 1
    return Loaded(counted, last)


def load(
    queue: Queue,
    lines: Iterable[str],
    default_type: str | None = None,
    *,
    batch: int = DEFAULT_BATCH,
    on_progress: Callable[[int], None] | None = None,
) -> int:
    """Enqueue the file's jobs, `batch` jobs per transaction (so a long load never holds one
    transaction open, which would keep vacuum from cleaning the claim index for every queue).
    Check the file first (`check`): a bad line found here leaves the earlier batches written."""
    return _load(queue, lines, default_type, batch, on_progress).jobs


def _load(
    queue: Queue,
    lines: Iterable[str],
    default_type: str | None,
    batch: int,
    on_progress: Callable[[int], None] | None,
) -> Loaded:
    jobs = jobs_of(lines, default_type)
    done = skipped = 0
    while chunk := list(itertools.islice(jobs, batch)):
        if any(job.unique for job in chunk):
            # COPY cannot skip a taken key: such a batch goes through the per-job path, in
            # slices it accepts.
            for start in range(0, len(chunk), UNIQUE_SLICE):
                found = queue.enqueue_outcomes(chunk[start : start + UNIQUE_SLICE])
                skipped += sum(1 for e in found if not e.created)
            done += len(chunk)
        else:
            done += queue.load_jobs(chunk)
        if on_progress is not None:
            on_progress(done)
    return Loaded(done, 0, skipped)


def progress_text(done: int, total: int, seconds: float, width: int = 30) -> str:
    """A one-line progress bar for a terminal (pure)."""
    share = done / total if total else 1.0
    filled = round(width * share)
    rate = f"{done / seconds:,.0f} jobs/s" if seconds > 0 else ""
    return f"[{'#' * filled}{'.' * (width - filled)}] {done:,}/{total:,} ({share:.0%}) {rate}".rstrip()


class NotAsRead(InvalidArgument):
    """The load wrote a different number of jobs than the check counted (the input changed)."""


def read_lines(stream: BinaryIO, limit: int) -> Iterator[str]:
    """The stream's lines as text, none read past `limit` bytes: a longer one (a file with no
    newline, /dev/zero) raises BadLine before more is read."""
    for number in itertools.count(1):
        raw = stream.readline(limit + 1)
        if not raw:
            return
        if len(raw) > limit:
            raise BadLine(
                number, "line", f"is longer than {limit} bytes", "write one job per line, each under the limit"
            )
        try:
            yield raw.decode("utf-8")
        except UnicodeDecodeError:
            raise BadLine(number, "line", "is not UTF-8", "write the file in UTF-8") from None


def _spooled(source: BinaryIO, limit: int, spool: IO[bytes]) -> Iterator[str]:
    """`read_lines(source)`, each line also written to `spool` for the second pass."""
    for text in read_lines(source, limit):
        spool.write(text.encode("utf-8"))
        yield text


def enqueue_file(
    queue: Queue,
    path: Path,
    default_type: str | None = None,
    *,
    batch: int = DEFAULT_BATCH,
    on_progress: Callable[[int, int], None] | None = None,
) -> Loaded:
    """`check` the whole input, then `load` it; `on_progress(done, total)` after each batch. Nothing
    is written unless every line is a valid job, and the input holds at least one.

    The input is opened and read once: a pipe (`/dev/stdin`, `<(zcat backfill.jsonl.gz)`) is empty
    the second time, so what cannot be re-read from its start is spooled to a temporary file while
    it is checked, and the load reads the spool. A load that writes a different number of jobs
    than the check counted (a regular file changed in between) is an error, never a quiet summary."""
    limit = max_line_bytes(queue.max_payload_bytes)
    try:
        source = path.open("rb")
    except OSError as exc:
        raise InvalidArgument(
            "--from-file", f"cannot read {str(path)[:200]!r} ({exc.__class__.__name__})", "give a readable UTF-8 file"
        ) from None
    with source, tempfile.TemporaryFile() as spool:
        try:
            seekable = source.seekable() and path.is_file()
            lines = read_lines(source, limit) if seekable else _spooled(source, limit, spool)
            found = check(lines, default_type, queue.max_payload_bytes)
        except OSError as exc:
            raise InvalidArgument(
                "--from-file", f"cannot read {str(path)[:200]!r} ({exc.__class__.__name__})", "give a readable file"
            ) from None
        if found.jobs == 0:
            raise InvalidArgument(
                "--from-file", f"holds no job ({found.lines} lines read)", "give a file with one JSON object per line"
            )
        again = source if seekable else spool
        again.seek(0)
        report = None if on_progress is None else (lambda done: on_progress(done, found.jobs))
        loaded = _load(queue, read_lines(again, limit), default_type, batch, report)
    if loaded.jobs != found.jobs:
        raise NotAsRead(
            "--from-file",
            f"{loaded.jobs} jobs were written but the check counted {found.jobs} (the input changed while it was read)",
            "load from a file nothing writes to, or from a pipe",
        )
    return Loaded(loaded.jobs, found.lines, loaded.skipped)


def payload_argument(given: str, stdin: BinaryIO, max_payload_bytes: int) -> str:
    """`--payload` as given, or read from @FILE or - (stdin): a large payload does not fit on a
    command line (the kernel's argument limit is near 2 MiB, and ps shows arguments to everyone).
    Read no further than max_line_bytes(max_payload_bytes): `@/dev/zero` is one error."""
    if given != "-" and not given.startswith("@"):
        return given
    limit = max_line_bytes(max_payload_bytes)
    try:
        if given == "-":
            raw = stdin.read(limit + 1)
        else:
            with Path(given[1:]).open("rb") as f:
                raw = f.read(limit + 1)
        if len(raw) > limit:
            raise InvalidArgument(
                "--payload", f"is longer than {limit} bytes", "a payload is at most the payload limit"
            )
        return raw.decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        problem = f"cannot read {given[1:200]!r} ({exc.__class__.__name__})"
        raise InvalidArgument("--payload", problem, "give @ and a readable UTF-8 file, or - for stdin") from None
