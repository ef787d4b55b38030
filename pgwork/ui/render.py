"""The templates' environment and filters: every job-controlled string is escaped and made
visible (pure, apart from loading the templates shipped in the package)."""

from __future__ import annotations

import json
import re
from datetime import datetime
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined

# C0 and C1 controls, DEL, and the Unicode line/paragraph separators and bidi overrides that can
# disguise text; a newline and a tab are kept (errors are tracebacks).
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def visible(value: Any) -> str:
    """`value` as text with every control character written as an escape (\\x1b, \\u202e), so
    hostile job data can neither hide text nor reach the terminal-like rendering of a <pre>."""
    if value is None:
        return ""
    text = value if isinstance(value, str) else str(value)
    return _CONTROL.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


def as_json(value: Any) -> str:
    if value is None:
        return ""
    return visible(json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True, default=str))


def age(seconds: float | None) -> str:
    """A duration for people: 42s, 3m 05s, 2h 10m, 3d 4h."""
    if seconds is None:
        return ""
    sign = "-" if seconds < 0 else ""
    s = int(abs(seconds))
    if s < 60:
        return f"{sign}{s}s"
    if s < 3600:
        return f"{sign}{s // 60}m {s % 60:02d}s"
    if s < 86400:
        return f"{sign}{s // 3600}h {s % 3600 // 60:02d}m"
    return f"{sign}{s // 86400}d {s % 86400 // 3600}h"


def since(moment: datetime | None, now: datetime) -> str:
    return "" if moment is None else age((now - moment).total_seconds())


def ts(moment: datetime | None) -> str:
    return "" if moment is None else moment.strftime("%Y-%m-%d %H:%M:%S %Z")


def count(value: int, cap: int | None) -> str:
    """A capped count as the operator reads it: at the cap it is a lower bound."""
    return f"≥{value}" if cap is not None and value >= cap else str(value)


def environment() -> Environment:
    env = Environment(
        loader=PackageLoader("pgwork.ui", "templates"),
        autoescape=True,  # always, whatever the file name: every page shows job data
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(visible=visible, as_json=as_json, age=age, ts=ts, count=count)
    env.globals.update(since=since)
    return env
