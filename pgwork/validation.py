"""Checks on what callers hand to the Queue. Pure: values in, normalised value or InvalidArgument out.

Everything refused here would otherwise fail later and worse: in the database (a NUL, a lone
surrogate, an interval out of range, a bigint overflow), in a worker that cannot decode the row
it claimed (JSON nested too deep, an integer too long for Python), or silently (an Arabic-Indic
digit read as a job id). The JSON checks walk values iteratively, so no input can exhaust the stack.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from typing import Any, NamedTuple

from pgwork.durations import MAX_SECONDS, parse_duration
from pgwork.errors import InvalidArgument
from pgwork.jsonshape import check_json, text_problem
from pgwork.keys import key_of_canonical
from pgwork.models import NewJob
from pgwork.pipeline import check_after, check_on_parent_failure
from pgwork.quoting import quoted

SMALLINT_MAX = 32767
BIGINT_MAX = 2**63 - 1
DEFAULT_MAX_PAYLOAD_BYTES = 1024 * 1024
# W3C traceparent is 55 characters and tracestate at most 512; baggage is small by contract.
MAX_TRACE_CONTEXT_BYTES = 4096
# Beyond a century a delay is a typo (milliseconds for seconds), and PostgreSQL's interval ends
# not much further.
MAX_DELAY_SECONDS = MAX_SECONDS
# last_error is kept, not grown without bound: the newest text wins.
MAX_ERROR_CHARS = 8000
# A job's hard timeout: above zero, at most a week (beyond that it is a typo, milliseconds for
# seconds). The jobs table's CHECK constraint holds the same bounds (migration 0010).
MAX_TIMEOUT_SECONDS = 7 * 86400.0


class JobRow(NamedTuple):
    """A job as validated, ready for the database. A NamedTuple, not a frozen dataclass: a bulk
    load makes millions, and a frozen dataclass takes several times longer to build."""

    job_type: str
    payload_json: str
    priority: int
    max_attempts: int
    available_at: datetime | None
    delay: float
    key: str
    trace_context: dict[str, str]
    timeout: float | None = None
    unique: bool = False
    after: tuple[int | str, ...] = ()
    runs_after_failure: bool = False  # on_parent_failure="run"


def check_text(value: Any, field: str, fix: str, *, max_chars: int | None = None) -> str:
    """A non-empty string PostgreSQL can store, at most `max_chars` long."""
    if not isinstance(value, str) or not value:
        raise InvalidArgument(field, f"must be a non-empty string, got {quoted(value)}", fix)
    if max_chars is not None and len(value) > max_chars:
        raise InvalidArgument(field, f"is {len(value)} characters long", f"use at most {max_chars} characters")
    problem = text_problem(value)
    if problem is not None:
        raise InvalidArgument(field, problem, "remove or replace that character")
    return value


def check_job_type(job_type: Any, field: str = "job_type") -> str:
    if not isinstance(job_type, str) or not job_type.strip():
        raise InvalidArgument(field, "must be a non-empty string", "name the kind of work, e.g. 'ocr'")
    return check_text(job_type, field, "name the kind of work, e.g. 'ocr'", max_chars=200)


def check_job_types(job_types: Iterable[str] | None, field: str = "job_types") -> list[str] | None:
    """None (every type) or a non-empty list of job types. A bare string is refused: iterating it
    would claim job types named after its letters."""
    if job_types is None:
        return None
    if isinstance(job_types, str | bytes):
        raise InvalidArgument(field, f"must be a list of job types, got the string {job_types!r}", "pass [name]")
    types = [check_job_type(t, field) for t in job_types]
    if not types:
        raise InvalidArgument(field, "is empty", "pass None for every type, or name at least one")
    return types


def check_int(value: Any, field: str, low: int, high: int, fix: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgument(field, f"must be a whole number, got {quoted(value)}", fix)
    if not low <= value <= high:
        raise InvalidArgument(field, f"{value} is out of range {low}..{high}", fix)
    return value


def _no_timeout(field: str) -> str:
    """How to ask for no timeout, in the words of where `field` was given (pure): a command-line
    option is left out, a JSON Lines field is null, a Python argument is None."""
    if field.startswith("--"):
        return f"leave out {field} for no timeout"
    return "None (null in a jobs file) for no timeout"


def check_timeout(value: Any, field: str = "timeout") -> float | None:
    """A hard timeout in seconds, or None for none: a number of seconds, a duration as people
    write it ('10m', '1h30m'), or a timedelta; above zero and at most MAX_TIMEOUT_SECONDS."""
    if value is None:
        return None
    fix = f"give a duration above zero and at most 7d, like 30s, 10m or 2h; {_no_timeout(field)}"
    if isinstance(value, str):
        try:
            seconds = parse_duration(value, field)
        except ValueError:
            negative = value.strip().lower().lstrip("+-") in ("nan", "inf", "infinity") or "-" in value
            what = "is not a duration above zero" if negative else "is not a duration"
            raise InvalidArgument(field, f"{quoted(value)} {what}", fix) from None
    elif isinstance(value, timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidArgument(field, f"must be seconds or a duration, got {quoted(value)}", fix)
    elif isinstance(value, int) and value > MAX_TIMEOUT_SECONDS:  # before float(): 10**400 overflows it
        raise InvalidArgument(field, f"{quoted(value, 40)} is more than 7 days (milliseconds for seconds?)", fix)
    else:
        seconds = float(value)
    if not math.isfinite(seconds) or seconds <= 0:
        raise InvalidArgument(field, f"{quoted(value)} is not a duration above zero", fix)
    if seconds > MAX_TIMEOUT_SECONDS:
        raise InvalidArgument(field, f"{quoted(value)} is more than 7 days (milliseconds for seconds?)", fix)
    return seconds


def check_id(value: Any, field: str = "id") -> int:
    return check_int(value, field, 1, BIGINT_MAX, "job ids are positive whole numbers, as `pgwork enqueue` prints")


def check_ids(ids: Any, field: str = "ids") -> list[int]:
    if isinstance(ids, str | bytes) or not isinstance(ids, Iterable):
        raise InvalidArgument(field, f"must be a list of job ids, got {quoted(ids)}", "pass e.g. [17, 18]")
    return [check_id(i, field) for i in ids]


def check_age(older_than: Any, field: str = "older_than") -> float:
    """An age for pruning, in seconds: a timedelta, never a bare number whose unit is a guess."""
    if not isinstance(older_than, timedelta):
        fix = "e.g. timedelta(days=30); a bare number has no unit"
        raise InvalidArgument(field, f"must be a timedelta, got {quoted(older_than)}", fix)
    seconds = older_than.total_seconds()
    if seconds < 0:
        raise InvalidArgument(field, "is negative", "give an age such as 30d")
    if seconds > MAX_SECONDS:  # now() - older_than would leave what a timestamp holds
        raise InvalidArgument(field, f"{seconds:g} seconds is more than a century", "give an age such as 30d")
    return seconds


def parse_id(text: str, field: str = "ID") -> int:
    """A job id typed by a person: ASCII digits only. `str.isdigit` also accepts '²' (which int()
    then refuses) and '٣' (which int() reads as 3): neither may name a job."""
    stripped = text.strip()
    if not (stripped.isascii() and stripped.isdigit()) or int(stripped) < 1 or int(stripped) > BIGINT_MAX:
        fix = f"give a positive whole number in ASCII digits, at most {BIGINT_MAX}"
        raise InvalidArgument(field, f"{quoted(text)} is not a job id", fix)
    return int(stripped)


def parse_job_types(values: Sequence[str] | None, field: str = "--job-types") -> list[str] | None:
    """Job types typed by a person, as the worker takes them (`a,b`; also `a b`, or both), in
    order without repeats; None when none were given. An empty name is refused (pure)."""
    if values is None:
        return None
    names: list[str] = []
    for value in values:
        for part in value.split(","):
            name = part.strip()
            if not name:
                raise InvalidArgument(field, f"{quoted(value)} has an empty name", "list types as a,b,c")
            check_job_type(name, field)
            if name not in names:
                names.append(name)
    if not names:
        raise InvalidArgument(field, "names no job type", "list types as a,b,c, or leave the option out for every type")
    return names


def parse_whole(text: str, field: str, fix: str) -> int:
    """An integer typed by a person: an optional minus sign and ASCII digits, nothing else."""
    stripped = text.strip()
    digits = stripped[1:] if stripped.startswith("-") else stripped
    if not (digits.isascii() and digits.isdigit()) or len(digits) > 18:
        raise InvalidArgument(field, f"{quoted(text)} is not a whole number", fix)
    return int(stripped)


def check_trace_context(value: Any) -> dict[str, str]:
    if isinstance(value, dict) and not value:
        return {}  # most jobs carry none
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise InvalidArgument("trace_context", "must map strings to strings", "use W3C traceparent headers")
    for key, item in value.items():
        problem = text_problem(key) or text_problem(item)
        if problem is not None:
            raise InvalidArgument("trace_context", f"{problem} (entry {key[:40]!r})", "use W3C traceparent headers")
    size = len(json.dumps(value, ensure_ascii=False).encode("utf-8"))
    if size > MAX_TRACE_CONTEXT_BYTES:
        raise InvalidArgument(
            "trace_context",
            f"is {size} bytes, over the limit of {MAX_TRACE_CONTEXT_BYTES}",
            "carry only traceparent, tracestate and small baggage",
        )
    return dict(value)


def validate(job: NewJob, max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES) -> JobRow:
    job_type = check_job_type(job.job_type)
    if not isinstance(job.payload, dict):
        raise InvalidArgument(
            "payload", f"must be a JSON object, got {type(job.payload).__name__}", "wrap the value: {'value': ...}"
        )
    payload_json = check_json(
        job.payload,
        "payload",
        max_payload_bytes,
        canonical=True,
        size_fix="store large documents elsewhere and pass a reference, or raise max_payload_bytes",
        types_fix="pass only JSON types",
    )
    priority = check_int(job.priority, "priority", 0, SMALLINT_MAX, "lower runs first; use 0..32767")
    max_attempts = check_int(job.max_attempts, "max_attempts", 1, SMALLINT_MAX, "use at least 1")
    if job.delay is not None and job.available_at is not None:
        raise InvalidArgument("delay", "was given together with available_at", "give one of them")
    delay = 0.0 if job.delay is None else job.delay
    # Compared before any conversion: math.isfinite(10**400) raises OverflowError.
    if (
        isinstance(delay, bool)
        or not isinstance(delay, int | float)
        or (isinstance(delay, float) and not math.isfinite(delay))
        or delay < 0
    ):
        raise InvalidArgument("delay", f"must be a finite number of seconds >= 0, got {quoted(job.delay)}", "e.g. 30")
    if delay > MAX_DELAY_SECONDS:
        shown = f"{delay:g}" if isinstance(delay, float) else quoted(delay, 40)
        raise InvalidArgument("delay", f"{shown} seconds is more than a century", "give seconds, e.g. 3600 for 1h")
    if job.available_at is not None:
        if not isinstance(job.available_at, datetime):
            raise InvalidArgument("available_at", f"must be a datetime, got {quoted(job.available_at)}", "or use delay")
        if job.available_at.tzinfo is None:
            raise InvalidArgument("available_at", "has no time zone", "pass an aware datetime, e.g. in UTC")
    if job.key is None:
        key = key_of_canonical(job_type, payload_json)
    else:
        if not isinstance(job.key, str) or not job.key or len(job.key) > 500:
            raise InvalidArgument("key", "must be 1..500 characters without NUL", "derive it from the work")
        key = check_text(job.key, "key", "derive it from the work", max_chars=500)
    trace_context = check_trace_context(job.trace_context)
    timeout = check_timeout(job.timeout)
    if not isinstance(job.unique, bool):
        raise InvalidArgument("unique", f"must be true or false, got {quoted(job.unique)}", "e.g. unique=True")
    after = check_after(job.after)
    if after and job.unique:
        raise InvalidArgument("unique", "cannot be combined with after", "give the job a key of its own and no unique")
    return JobRow(
        job_type,
        payload_json,
        priority,
        max_attempts,
        job.available_at,
        float(delay),
        key,
        trace_context,
        timeout,
        job.unique,
        after,
        check_on_parent_failure(job.on_parent_failure),
    )


def error_text(error: Any, limit: int = MAX_ERROR_CHARS) -> str:
    """Any error text made storable in last_error: never refused by PostgreSQL, whatever a handler's
    exception says. A NUL is shown as \\x00 and a lone surrogate as \\udcXX; then cut to `limit`."""
    text = error if isinstance(error, str) else str(error)
    text = text.encode("utf-8", "backslashreplace").decode("utf-8").replace("\x00", "\\x00")
    return text if len(text) <= limit else text[: limit - 15] + " …[truncated]"
