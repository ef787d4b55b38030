"""Per-type limits across the fleet, as values: parsing and checking what a person or a caller
gives, and showing what the database holds. Pure; the database enforces them in the claim
(migration 11) and the Queue reads and writes them (pgwork.db.limits)."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from pgwork.errors import InvalidArgument
from pgwork.quoting import quoted
from pgwork.validation import check_int, check_job_type

# As the database's CHECK constraints (migrations/0011_type_limits.sql).
MAX_RUNNING = 1_000_000
MAX_RATE_COUNT = 1_000_000
MAX_RATE_SECONDS = 86_400
RATE_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86_400}
# Digits bounded in the pattern: int() of thousands of digits raises a ValueError of its own.
_RATE = re.compile(r"([0-9]{1,12})/([0-9]{0,12})([a-z]{1,12})")
RATE_FIX = "write COUNT/UNIT with unit s, m, h or d, such as 60/m, 5/s, 1000/h or 100/10s"


@dataclass(frozen=True)
class Rate:
    """At most `count` claims per `seconds` (a token bucket of `count`, refilled at that rate)."""

    count: int
    seconds: float

    def __str__(self) -> str:
        return format_rate(self.count, self.seconds)


@dataclass(frozen=True)
class TypeLimit:
    """A type's limit; `running` and `tokens` (the bucket now) are as the database read them."""

    job_type: str
    max_running: int | None
    rate_count: int | None
    rate_seconds: float | None
    running: int | None = None
    tokens: float | None = None

    @property
    def rate(self) -> Rate | None:
        if self.rate_count is None or self.rate_seconds is None:
            return None
        return Rate(self.rate_count, self.rate_seconds)


def parse_rate(text: str, field: str = "--rate") -> Rate:
    """`60/m` → Rate(60, 60). A period may carry a number (`100/10s`); counts and periods are
    whole, the period 1 second to 1 day."""
    cleaned = text.strip().lower().replace(" ", "")
    match = _RATE.fullmatch(cleaned)
    if match is None:
        raise InvalidArgument(field, f"{quoted(text)} is not a rate", RATE_FIX)
    count_text, times_text, unit = match.groups()
    if unit not in RATE_UNITS:
        raise InvalidArgument(field, f"{unit!r} is not a unit of time", RATE_FIX)
    times = int(times_text) if times_text else 1
    count = int(count_text)
    if count < 1:
        raise InvalidArgument(field, f"{quoted(text)} allows no claim at all", "use at least 1 per period, e.g. 1/m")
    if count > MAX_RATE_COUNT:
        raise InvalidArgument(field, f"{count} claims per period is over {MAX_RATE_COUNT}", "lift the rate instead")
    seconds = times * RATE_UNITS[unit]
    if not 1 <= seconds <= MAX_RATE_SECONDS:
        raise InvalidArgument(field, f"a period of {seconds} s is outside 1 s..1 d", "use a period of 1s to 1d")
    return Rate(count, float(seconds))


def format_rate(count: int, seconds: float) -> str:
    """Rate(60, 60) → `60/m`; the largest unit that divides the period (`100/10s`, `5/2h`)."""
    for unit, size in sorted(RATE_UNITS.items(), key=lambda u: -u[1]):
        if seconds >= size and math.isclose(seconds % size, 0, abs_tol=1e-9):
            times = round(seconds / size)
            return f"{count}/{'' if times == 1 else times}{unit}"
    return f"{count}/{seconds:g}s"


def check_limit(job_type: str, max_running: int | None, rate: Rate | None) -> TypeLimit:
    """The limit to store, or InvalidArgument naming the field and the fix (pure)."""
    check_job_type(job_type)
    if max_running is not None:
        check_int(max_running, "max_running", 1, MAX_RUNNING, "allow at least 1 running job, or clear the type's limit")
    if rate is not None:
        check_int(rate.count, "rate", 1, MAX_RATE_COUNT, RATE_FIX)
        if isinstance(rate.seconds, bool) or not (1 <= rate.seconds <= MAX_RATE_SECONDS):
            raise InvalidArgument("rate", f"a period of {rate.seconds!r} s is outside 1 s..1 d", RATE_FIX)
    if max_running is None and rate is None:
        raise InvalidArgument(
            "limit", "names neither max_running nor a rate", "give --max-running N and/or --rate N/UNIT, or clear it"
        )
    return TypeLimit(job_type, max_running, rate.count if rate else None, float(rate.seconds) if rate else None)


def describe(max_running: int | None, rate_count: int | None, rate_seconds: float | None) -> str:
    """One cell for `pgwork stats`: `max 4, 60/m`, or `-` for no limit."""
    parts = []
    if max_running is not None:
        parts.append(f"max {max_running}")
    if rate_count is not None and rate_seconds is not None:
        parts.append(format_rate(rate_count, rate_seconds))
    return ", ".join(parts) or "-"
