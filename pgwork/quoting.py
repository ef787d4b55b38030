"""How a value a caller passed is quoted inside an error message.

The value may be huge (a 2 MiB payload), hostile (terminal escapes, a lookalike digit such as
U+0663) or not even printable, and the message goes to a terminal, a log or a JobQueue's status.
So it is shown as its ASCII repr, cut short: what was wrong stays recognisable, nothing else
travels with it.
"""

from __future__ import annotations

from typing import Any

LIMIT = 80


def quoted(value: Any, limit: int = LIMIT) -> str:
    """`value` as an error message quotes it: ascii(value), at most `limit` characters."""
    try:
        text = ascii(value)
    except Exception:  # a hostile __repr__ must not turn a clear error into another one
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def inert(text: str) -> str:
    """A message that may carry a caller's value (the server's error quoting a job's key) with every
    character that is not printable (control, bidi override, NUL) written as its escape: the rest,
    accents and scripts included, is left as it reads."""
    return "".join(c if c.isprintable() else ascii(c)[1:-1] for c in text)
