"""Durations as people write them: `30`, `30s`, `1.5m`, `2h`, `7d`, `1h30m`, and seconds from code.

Digits are ASCII only: `float()` also reads '٣' as 3 and '1e3' or '1_000' as 1000, none of
which a person typing a duration means.

Every duration is bounded before any arithmetic: a text longer than any duration, or a value past
the field's maximum (a century unless the field says less), is refused in one line naming the
field, never turned into an OverflowError, a digit-limit ValueError or a database error.
"""

from __future__ import annotations

import math
import re
from typing import Any

from pgwork.errors import InvalidArgument
from pgwork.quoting import quoted

# The longest duration anything accepts: beyond a century it is a typo (milliseconds for
# seconds), and PostgreSQL's interval and timestamptz arithmetic end not far past it.
MAX_SECONDS = 100 * 365 * 86400.0
# The longest lease a claim or a worker takes (the CRD's lease.durationSeconds caps it too): a
# crashed worker's job stays running this long at most.
MAX_LEASE_SECONDS = 86400.0
# No duration a person writes is longer (`1d2h3m4s500ms` is 13): the text is refused before float().
MAX_TEXT = 64

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_NUMBER = re.compile(r"[0-9]+(?:\.[0-9]+)?")
_PART = re.compile(r"([0-9]+(?:\.[0-9]+)?)(ms|s|m|h|d)")


_NOT_NEGATIVE = "must be a finite duration >= 0 (write 0 or more, like 30s or 5m)"


def parse_duration(text: str, field: str = "duration", maximum: float = MAX_SECONDS) -> float:
    """Seconds in `text`, at most `maximum`. A bare number is seconds. Raises ValueError naming `field`."""
    if len(text) > MAX_TEXT:
        raise ValueError(
            f"{field}: {quoted(text, 40)} is longer than any duration (at most {format_duration(maximum)})"
        )
    cleaned = text.strip().lower()
    if _NUMBER.fullmatch(cleaned):
        return _bounded(_non_negative(float(cleaned), field, text), field, text, maximum)
    pos = 0
    total = 0.0
    for match in _PART.finditer(cleaned):
        if match.start() != pos:
            break
        total += float(match.group(1)) * _UNITS[match.group(2)]
        pos = match.end()
    if pos != len(cleaned) or not cleaned:
        if cleaned.startswith("-") or cleaned.lstrip("+-") in ("nan", "inf", "infinity"):
            raise ValueError(f"{field}: {quoted(text)} {_NOT_NEGATIVE}")
        raise ValueError(
            f"{field}: {quoted(text)} is not a duration (write seconds like 30, or 30s, 5m, 2h, 7d, 1h30m)"
        )
    return _bounded(_non_negative(total, field, text), field, text, maximum)


def _bounded(seconds: float, field: str, text: str, maximum: float) -> float:
    if seconds > maximum:
        most = format_duration(maximum)
        raise ValueError(f"{field}: {quoted(text, 40)} is more than {most} (give at most {most})")
    return seconds


def check_seconds(
    value: Any, field: str, *, low: float = 0.0, high: float = MAX_SECONDS, fix: str = "e.g. 30"
) -> float:
    """A number of seconds passed in code: an int or float within low..high, compared before any
    conversion (an int of thousands of digits is compared as an int, never made a float)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidArgument(field, f"must be a number of seconds, got {quoted(value, 40)}", fix)
    if not low <= value <= high:  # NaN fails both comparisons; a huge int compares exactly
        raise InvalidArgument(field, f"{quoted(value, 40)} is outside {low:g}..{high:g} seconds", fix)
    return float(value)


def parse_age(text: str, field: str = "age") -> float:
    """Seconds in an age that decides what is deleted. Unlike `parse_duration` a bare number is
    refused: `--older-than 30` meant 30 days to the person who typed it and 30 seconds to the
    parser, and the difference was every finished job of the last month."""
    cleaned = text.strip().lower()
    if _NUMBER.fullmatch(cleaned):
        raise ValueError(
            f"{field}: {quoted(text)} has no unit, and pgwork will not guess one for an age that decides what is "
            f"deleted (write {cleaned}d for days, or {cleaned}h, {cleaned}m, {cleaned}s)"
        )
    return parse_duration(text, field)


def _non_negative(value: float, field: str, text: str) -> float:
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{field}: {quoted(text)} {_NOT_NEGATIVE}")
    return value


def format_duration(seconds: float) -> str:
    """`seconds` as a person writes it, the way parse_duration reads it back: 600 -> '10m',
    5400 -> '1h30m', 1.5 -> '1.5s', 0.25 -> '250ms'. For messages (a timeout's last_error)."""
    if not math.isfinite(seconds) or seconds < 0:
        return f"{seconds}s"
    if seconds < 1:
        return f"{seconds * 1000:.0f}ms"
    whole = round(seconds)
    if abs(seconds - whole) > 1e-9:
        return f"{seconds:.3g}s" if seconds < 60 else f"{seconds:g}s"
    parts = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        count, whole = divmod(whole, size)
        if count:
            parts.append(f"{count}{unit}")
    return "".join(parts)
