"""Plain-text tables for the CLI. Pure: rows in, text out."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any


def cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.1f}"
    if isinstance(value, datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S%z")
    text = str(value).replace("\n", " ")
    return text if len(text) <= 80 else text[:77] + "..."


def render(rows: Sequence[dict[str, Any]], columns: Sequence[str] | None = None, empty: str = "(none)") -> str:
    if not rows:
        return empty
    cols = list(columns or rows[0].keys())
    cells = [[cell(r.get(c)) for c in cols] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(cols)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(cols, widths, strict=True)).rstrip()]
    lines.append("  ".join("-" * w for w in widths))
    lines.extend("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip() for row in cells)
    return "\n".join(lines)
