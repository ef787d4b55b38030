"""Words about a job's failure for last_error, logs and spans: the exception and its traceback,
always with connection-string passwords redacted, never raising whatever the handler raised."""

from __future__ import annotations

import logging
import traceback

from pgwork.credentials import redact
from pgwork.decoding import undecodable_reason
from pgwork.models import ClaimedJob

log = logging.getLogger("pgwork.worker")


def describe_error(exc: BaseException, limit: int = 4000) -> str:
    """What goes into last_error: the exception line first, then the end of the traceback, with
    any connection-string password redacted (a handler's exception may quote its own DSN). An
    exception standing for one raised in a handler process carries that text already."""
    described = getattr(exc, "pgwork_described", None)
    if isinstance(described, str) and described:
        text = redact(described)
        return text if len(text) <= limit else text[: limit - 15] + " …[truncated]"
    head = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    tail = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__, limit=-6)).strip()
    text = redact(f"{head}\n{tail}")
    return text if len(text) <= limit else text[: limit - 15] + " …[truncated]"


def error_type(exc: BaseException) -> str:
    cls = type(exc)
    return cls.__qualname__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}"


def safe_str(exc: BaseException) -> str:
    """str(exc), or a stand-in when the exception's own __str__ raises (a handler's bug must
    never stop the worker from recording the failure)."""
    try:
        return str(exc)
    except Exception as inner:
        return f"<str() of {type(exc).__name__} raised {type(inner).__name__}>"


def first_line(exc: BaseException) -> str:
    text = redact(safe_str(exc)).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0]}" if text else type(exc).__name__


def payload_problem(claimed: ClaimedJob) -> str | None:
    """Why a claimed job's payload cannot be handed to a handler, or None. Such a row was written
    by plain SQL (pgwork refuses these values at enqueue); it will never decode, so the job goes
    dead at once instead of being retried."""
    reason = undecodable_reason(claimed.payload)
    if reason is None and not isinstance(claimed.payload, dict):
        reason = f"a JSON {type(claimed.payload).__name__}, not an object"
    if reason is None:
        return None
    return (
        f"pgwork.UndecodablePayload: the payload of job {claimed.id} cannot be read: {reason}. "
        "It was not written by pgwork's enqueue (which refuses such values); fix the row's payload "
        "and run `pgwork retry ID`, or enqueue the work again"
    )


def redact_message(exc: BaseException) -> str:
    """The exception's message for a span, password redacted."""
    return redact(safe_str(exc))


def usable_trace_context(claimed: ClaimedJob) -> dict[str, str]:
    """The claimed trace context if it is a map of strings, else none: tracing is advisory, so a
    row with an unreadable context still runs, just without its producer's trace."""
    value = claimed.trace_context
    if type(value) is dict and not value:
        return {}  # most jobs carry none: no scan, no copy
    if isinstance(value, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        return dict(value)
    why = undecodable_reason(value) or f"a JSON {type(value).__name__}, not a map of strings"
    log.warning("job %s: ignoring its trace_context (%s)", claimed.id, why)
    return {}
