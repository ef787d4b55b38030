"""Plain-text tables for the CLI. Pure: rows in, text out.

Job data (types, owners, keys, error texts) is written by whoever can enqueue or raise, and a
terminal obeys the control characters in it: ESC starts sequences that recolour, retitle or
rewrite the screen, CR and BEL overwrite and ring, bidi overrides (U+202E) reverse what is read.
So every cell shows such characters escaped (`\\x1b`, `\\r`, `\\u202e`), never raw.
"""

from __future__ import annotations

import math
import unicodedata
from collections.abc import Sequence
from datetime import datetime
from typing import Any

# Unicode categories a terminal may act on or that change how text around them reads: controls
# (C0, DEL, C1), format characters (bidi embeddings, overrides and isolates, zero-width joiners),
# line/paragraph separators, and unassigned or surrogate code points.
_UNSAFE_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs", "Co", "Cn"})


def visible(text: str) -> str:
    """`text` with every character a terminal could act on written as an escape. Newlines and
    tabs become spaces (a cell is one line); everything printable is kept as it is."""
    if text.isprintable() and text.isascii():
        return text
    out = []
    for char in text:
        if char in "\n\t":
            out.append(" ")
        elif unicodedata.category(char) in _UNSAFE_CATEGORIES:
            out.append(_escape(char))
        else:
            out.append(char)
    return "".join(out)


_JSON_SHORT = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\b": "\\b", "\f": "\\f"}


def inert(text: str, *, keep_newlines: bool = False) -> str:
    """`text` for a log line: every character a terminal could act on (ESC, BEL, CR, bidi
    overrides...) written as a JSON-style escape (`\\u001b`, `\\r`), so job data quoted in a log
    can neither rewrite the terminal nor forge a line. `keep_newlines` keeps real line breaks (a
    traceback's); anything else printable is kept as it is. Pure."""
    if text.isascii() and text.isprintable():
        return text
    out = []
    for char in text:
        if char == "\n" and keep_newlines:
            out.append(char)
        elif char in _JSON_SHORT:
            out.append(_JSON_SHORT[char])
        elif unicodedata.category(char) in _UNSAFE_CATEGORIES:
            code = ord(char)
            out.append(
                f"\\u{code:04x}"
                if code < 0x10000
                else f"\\u{0xD7C0 + (code >> 10):04x}\\u{0xDC00 | (code & 0x3FF):04x}"
            )
        else:
            out.append(char)
    return "".join(out)


def _escape(char: str) -> str:
    code = ord(char)
    if char == "\r":
        return "\\r"
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.1f}" if math.isfinite(value) else str(value)
    if isinstance(value, datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S%z")
    text = visible(str(value))
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


def json_safe(value: Any) -> Any:
    """`value` made fit for strict JSON output: non-finite floats become strings (json.dumps would
    write NaN or Infinity, which no JSON parser accepts); containers are copied, leaves kept."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    return value
