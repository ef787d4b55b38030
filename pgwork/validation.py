"""Checks on what producers hand to enqueue. Pure: values in, normalised row or InvalidArgument out."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pgwork.errors import InvalidArgument
from pgwork.keys import canonical_json, derive_key
from pgwork.models import NewJob

SMALLINT_MAX = 32767
DEFAULT_MAX_PAYLOAD_BYTES = 1024 * 1024


@dataclass(frozen=True)
class JobRow:
    job_type: str
    payload_json: str
    priority: int
    max_attempts: int
    available_at: datetime | None
    delay: float
    key: str
    trace_context: dict[str, str]


def check_job_type(job_type: Any, field: str = "job_type") -> str:
    if not isinstance(job_type, str) or not job_type.strip():
        raise InvalidArgument(field, "must be a non-empty string", "name the kind of work, e.g. 'ocr'")
    if len(job_type) > 200:
        raise InvalidArgument(field, f"is {len(job_type)} characters long", "use at most 200 characters")
    if "\x00" in job_type:
        raise InvalidArgument(field, "contains a NUL character", "remove it; PostgreSQL text cannot hold NUL")
    return job_type


def check_int(value: Any, field: str, low: int, high: int, fix: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgument(field, f"must be a whole number, got {value!r}", fix)
    if not low <= value <= high:
        raise InvalidArgument(field, f"{value} is out of range {low}..{high}", fix)
    return value


def validate(job: NewJob, max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES) -> JobRow:
    job_type = check_job_type(job.job_type)
    if not isinstance(job.payload, dict):
        raise InvalidArgument(
            "payload", f"must be a JSON object, got {type(job.payload).__name__}", "wrap the value: {'value': ...}"
        )
    try:
        payload_json = canonical_json(job.payload)
    except (TypeError, ValueError) as exc:
        raise InvalidArgument("payload", f"is not JSON-serialisable ({exc})", "pass only JSON types") from None
    if "\\u0000" in payload_json:
        raise InvalidArgument("payload", "contains a NUL character", "PostgreSQL jsonb cannot hold \\u0000")
    size = len(payload_json.encode("utf-8"))
    if size > max_payload_bytes:
        raise InvalidArgument(
            "payload",
            f"is {size} bytes, over the limit of {max_payload_bytes}",
            "store large documents elsewhere and pass a reference, or raise max_payload_bytes",
        )
    priority = check_int(job.priority, "priority", 0, SMALLINT_MAX, "lower runs first; use 0..32767")
    max_attempts = check_int(job.max_attempts, "max_attempts", 1, SMALLINT_MAX, "use at least 1")
    if job.delay is not None and job.available_at is not None:
        raise InvalidArgument("delay", "was given together with available_at", "give one of them")
    delay = 0.0 if job.delay is None else job.delay
    if isinstance(delay, bool) or not isinstance(delay, int | float) or not math.isfinite(delay) or delay < 0:
        raise InvalidArgument("delay", f"must be a finite number of seconds >= 0, got {job.delay!r}", "e.g. 30")
    if job.available_at is not None and job.available_at.tzinfo is None:
        raise InvalidArgument("available_at", "has no time zone", "pass an aware datetime, e.g. in UTC")
    if job.key is None:
        key = derive_key(job_type, job.payload)
    else:
        if not isinstance(job.key, str) or not job.key or len(job.key) > 500 or "\x00" in job.key:
            raise InvalidArgument("key", "must be 1..500 characters without NUL", "derive it from the work")
        key = job.key
    if not isinstance(job.trace_context, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in job.trace_context.items()
    ):
        raise InvalidArgument("trace_context", "must map strings to strings", "use W3C traceparent headers")
    return JobRow(
        job_type, payload_json, priority, max_attempts, job.available_at, float(delay), key, dict(job.trace_context)
    )
