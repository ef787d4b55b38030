"""Durations as people write them: `30`, `30s`, `1.5m`, `2h`, `7d`, `1h30m`."""

from __future__ import annotations

import math
import re

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")


def parse_duration(text: str, field: str = "duration") -> float:
    """Seconds in `text`. A bare number is seconds. Raises ValueError naming `field`."""
    cleaned = text.strip().lower()
    try:
        number = float(cleaned)
    except ValueError:
        number = None
    if number is not None:
        return _non_negative(number, field, text)
    pos = 0
    total = 0.0
    for match in _PART.finditer(cleaned):
        if match.start() != pos:
            break
        total += float(match.group(1)) * _UNITS[match.group(2)]
        pos = match.end()
    if pos != len(cleaned) or not cleaned:
        raise ValueError(f"{field}: {text!r} is not a duration (write seconds like 30, or 30s, 5m, 2h, 7d, 1h30m)")
    return _non_negative(total, field, text)


def _non_negative(value: float, field: str, text: str) -> float:
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{field}: {text!r} must be a finite duration >= 0")
    return value
