"""The jobs list's filter: read from a query string, checked, written back (pure).

A filter is what the jobs page shows and what a bulk action acts on, so both read it from the
same query string through `parse_filter`; a bad field is one clear message naming it and the fix.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from urllib.parse import urlencode

STATES = ("pending", "running", "succeeded", "dead", "cancelled")
PAGE = 50  # matches per page
SCAN = 20_000  # jobs one page looks at, newest first from its cursor: the bound on a page's cost
BULK_SCAN = 40_000  # jobs a bulk action looks at, newest first from the page's cursor (under 100 ms)
BULK_CAP = 10_000  # jobs one bulk action changes at most
_PATH = re.compile(r"^[A-Za-z0-9_\-]+(\.[A-Za-z0-9_\-]+){0,7}$")


class FilterError(ValueError):
    """A filter field the console cannot use: `field` names it, the message says the fix."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


@dataclass(frozen=True)
class JobFilter:
    job_type: str | None = None
    state: str | None = None
    error: str | None = None
    created_from: datetime | None = None
    created_to: datetime | None = None
    payload_path: tuple[str, ...] | None = None
    payload_value: str | None = None
    before: int | None = None  # keyset cursor: only jobs with a lower id

    def is_empty(self) -> bool:
        return self == JobFilter(before=self.before)

    def uses_payload(self) -> bool:
        return self.payload_path is not None

    def without_cursor(self) -> JobFilter:
        return replace(self, before=None)

    def query(self, **changes: object) -> str:
        """The query string that reads back as this filter (with `changes`), empty fields left out."""
        f = replace(self, **changes)  # type: ignore[arg-type]
        fields = {
            "type": f.job_type,
            "state": f.state,
            "error": f.error,
            "from": f.created_from.isoformat() if f.created_from else None,
            "to": f.created_to.isoformat() if f.created_to else None,
            "path": ".".join(f.payload_path) if f.payload_path else None,
            "value": f.payload_value if f.payload_path else None,
            "before": str(f.before) if f.before is not None else None,
        }
        return urlencode({k: v for k, v in fields.items() if v is not None})

    def describe(self) -> str:
        """One line for the action log and the confirmation page."""
        parts = [
            f"type={self.job_type}" if self.job_type else "",
            f"state={self.state}" if self.state else "",
            f"error~{self.error!r}" if self.error else "",
            f"created>={self.created_from.isoformat()}" if self.created_from else "",
            f"created<{self.created_to.isoformat()}" if self.created_to else "",
            f"payload.{'.'.join(self.payload_path)}={self.payload_value!r}" if self.payload_path else "",
            f"id<{self.before}" if self.before is not None else "",
        ]
        return " ".join(p for p in parts if p) or "every job"


def _text(params: Mapping[str, str], name: str, limit: int) -> str | None:
    value = params.get(name, "").strip()
    if not value:
        return None
    if len(value) > limit:
        raise FilterError(name, f"is {len(value)} characters; use at most {limit}")
    if "\x00" in value:
        raise FilterError(name, "contains a NUL character; remove it")
    return value


def _time(params: Mapping[str, str], name: str) -> datetime | None:
    value = _text(params, name, 64)
    if value is None:
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise FilterError(
            name, f"{value!r} is not a time; write it as 2026-01-31T12:00 (UTC unless an offset is given)"
        ) from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def parse_filter(params: Mapping[str, str]) -> JobFilter:
    """The filter a query string names; FilterError names the first bad field."""
    state = _text(params, "state", 20)
    if state is not None and state not in STATES:
        raise FilterError("state", f"{state!r} is not a state; use one of {', '.join(STATES)}")
    path_text = _text(params, "path", 200)
    path = None
    if path_text is not None:
        if not _PATH.match(path_text):
            raise FilterError("path", "use dotted keys of letters, digits, _ and - (at most 8), e.g. customer.id")
        path = tuple(path_text.split("."))
    value = _text(params, "value", 500)
    if path is not None and value is None:
        raise FilterError("value", "a payload path needs the value to match; fill in both or neither")
    before_text = _text(params, "before", 20)
    before = None
    if before_text is not None:
        if not before_text.isdigit() or int(before_text) < 1:
            raise FilterError("before", "must be a job id (a positive whole number); follow the page links")
        before = int(before_text)
    created_from, created_to = _time(params, "from"), _time(params, "to")
    if created_from and created_to and created_from >= created_to:
        raise FilterError("to", "must be later than from")
    return JobFilter(
        job_type=_text(params, "type", 200),
        state=state,
        error=_text(params, "error", 500),
        created_from=created_from,
        created_to=created_to,
        payload_path=path,
        payload_value=value if path is not None else None,
        before=before,
    )


def parse_ids(text: str) -> list[int]:
    """Job ids from a form field ("12, 13 14"); FilterError if one is not an id."""
    ids: list[int] = []
    for token in re.split(r"[\s,]+", text.strip()):
        if not token:
            continue
        if not token.isdigit() or int(token) < 1 or len(token) > 19:
            raise FilterError("ids", f"{token[:30]!r} is not a job id; give positive whole numbers")
        ids.append(int(token))
    if not ids:
        raise FilterError("ids", "name at least one job id")
    if len(ids) > BULK_CAP:
        raise FilterError("ids", f"{len(ids)} jobs; act on at most {BULK_CAP} at once")
    return sorted(set(ids))
