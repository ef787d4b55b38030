"""Durations as people write them: `30`, `30s`, `1.5m`, `2h`, `7d`, `1h30m`.

Digits are ASCII only: `float()` also reads '٣' as 3 and '1e3' or '1_000' as 1000, none of
which a person typing a duration means.
"""

from __future__ import annotations

import math
import re

from pgwork.quoting import quoted

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_NUMBER = re.compile(r"[0-9]+(?:\.[0-9]+)?")
_PART = re.compile(r"([0-9]+(?:\.[0-9]+)?)(ms|s|m|h|d)")


_NOT_NEGATIVE = "must be a finite duration >= 0 (write 0 or more, like 30s or 5m)"


def parse_duration(text: str, field: str = "duration") -> float:
    """Seconds in `text`. A bare number is seconds. Raises ValueError naming `field`."""
    cleaned = text.strip().lower()
    if _NUMBER.fullmatch(cleaned):
        return _non_negative(float(cleaned), field, text)
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
    return _non_negative(total, field, text)


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
