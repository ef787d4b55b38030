"""The shape of JSON and text that PostgreSQL must hold and any pgwork reader must decode again: NULs,
lone surrogates, nesting, non-finite numbers and sizes, measured the way the server measures them. Pure:
values in, JSON text or a reason out. Walks are iterative, so no input can exhaust the stack."""

from __future__ import annotations

import json
import math
from decimal import Decimal
from typing import Any

from pgwork.errors import InvalidArgument
from pgwork.keys import canonical_json

# A result lives in one jsonb value next to the job; larger outputs belong in object storage.
MAX_RESULT_BYTES = 16 * 1024 * 1024
# Objects and arrays inside one another. Python's own json module gives up near 1000 (and less on
# a thread with a deep stack); 100 leaves room for every real document and decodes anywhere.
MAX_JSON_DEPTH = 100
# json.dumps(value, allow_nan=False, ensure_ascii=False), made once: json.dumps builds a new encoder
# for every call that passes options (about 0.7 of a small result's 2 us, issue 28).
_PLAIN = json.JSONEncoder(allow_nan=False, ensure_ascii=False)


def text_problem(text: str) -> str | None:
    """Why PostgreSQL text cannot hold `text`, or None. Only a real U+0000 is a NUL: the six
    characters backslash-u-0-0-0-0 are ordinary text."""
    if "\x00" in text:
        return "contains a NUL character (U+0000), which PostgreSQL text and jsonb cannot hold"
    if text.isascii():
        return None
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        char = text[exc.start]
        return (
            f"contains {ascii(char)[1:-1]} at character {exc.start}, a lone surrogate that is not valid "
            "Unicode (a non-UTF-8 byte read from a file or the command line?)"
        )
    return None


def _json_problem(value: Any, max_depth: int) -> str | None:
    """What in `value` JSON or PostgreSQL cannot hold, found without recursion, or None. The
    first walk keeps no paths (most values are fine, and paths cost more than the checks); only
    when it finds a problem does a second walk say where."""
    if _walk(value, max_depth, paths=False) is None:
        return None
    return _walk(value, max_depth, paths=True)


def _walk(value: Any, max_depth: int, *, paths: bool) -> str | None:
    stack: list[tuple[Any, int, str]] = [(value, 0, "")]
    while stack:
        node, depth, path = stack.pop()
        if isinstance(node, str):
            problem = text_problem(node)
            if problem is not None:
                return f"{problem} at {path or 'the top'}"
        elif isinstance(node, float):
            if not math.isfinite(node):
                return f"is not JSON-serialisable ({node!r} at {path or 'the top'}; JSON has no NaN or Infinity)"
        elif isinstance(node, dict | list | tuple):
            if depth >= max_depth:
                return f"is nested more than {max_depth} levels deep (at {path[:60]}...)"
            if isinstance(node, dict):
                for key, item in node.items():
                    if isinstance(key, str):
                        problem = text_problem(key)
                        if problem is not None:
                            return f"has a key that {problem} at {path or 'the top'}"
                    stack.append((item, depth + 1, f"{path}[{key!r}]"[:200] if paths else ""))
            elif paths:
                stack.extend((item, depth + 1, f"{path}[{i}]"[:200]) for i, item in enumerate(node))
            else:
                stack.extend((item, depth + 1, "") for item in node)
    return None


def _plainly_fine(value: Any, max_bytes: int, *, canonical: bool) -> str | None:
    """The JSON text of `value` when it is evidently fine, else None (then the full checks run
    and name the problem). A bulk enqueue validates millions of payloads; serialising first and
    reading the text is several times cheaper than walking every value. Sound, never lenient:
    JSON escapes U+0000 as \\u0000 (a literal backslash-u0000 also matches and merely takes the
    slow path), a lone surrogate fails the UTF-8 encoding, and nesting cannot exceed the number of
    '{' and '[' in the text."""
    try:
        text = canonical_json(value) if canonical else _PLAIN.encode(value)
        size = len(text.encode("utf-8"))
    except (TypeError, ValueError, RecursionError):  # UnicodeEncodeError is a ValueError
        return None
    if size > max_bytes or "\\u0000" in text or text.count("{") + text.count("[") > MAX_JSON_DEPTH:
        return None
    return text


def check_json(value: Any, field: str, max_bytes: int, *, canonical: bool, size_fix: str, types_fix: str) -> str:
    """`value` as JSON text that jsonb accepts and any pgwork reader can decode again."""
    fast = _plainly_fine(value, max_bytes, canonical=canonical)
    if fast is not None:
        return fast
    problem = _json_problem(value, MAX_JSON_DEPTH)
    if problem is not None:
        raise InvalidArgument(field, problem, f"flatten it; {types_fix}" if "nested" in problem else types_fix)
    try:
        text = canonical_json(value) if canonical else _PLAIN.encode(value)
    except (TypeError, ValueError, RecursionError) as exc:
        raise InvalidArgument(field, f"is not JSON-serialisable ({str(exc)[:200]})", types_fix) from None
    size = len(text.encode("utf-8"))
    if size > max_bytes:
        raise InvalidArgument(field, f"is {size} bytes, over the limit of {max_bytes}", size_fix)
    return text


def jsonb_text_bytes(value: Any, text: str) -> int:
    """The bytes PostgreSQL counts for `value` (octet_length(value::jsonb::text)), given its JSON
    `text` from json.dumps: jsonb prints `, ` and `: ` between items and every number in plain
    decimal, so `1e300` (6 bytes here) is 301 there. A limit the server also checks is measured
    this way, so what the client lets through the server accepts. Pure."""
    spaced = json.dumps(value, allow_nan=False, ensure_ascii=False, separators=(", ", ": "))
    size = len(spaced.encode("utf-8"))
    if "e" in text:  # only floats Python writes with an exponent grow; skip the walk without any
        size += _exponent_excess(value)
    return size


def _exponent_excess(value: Any) -> int:
    excess = 0
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, float):
            shown = repr(node)
            if "e" in shown:
                excess += len(format(Decimal(shown), "f")) - len(shown)
        elif isinstance(node, dict):
            stack.extend(node.values())
        elif isinstance(node, list | tuple):
            stack.extend(node)
    return excess


def result_json(result: Any, max_bytes: int = MAX_RESULT_BYTES) -> str:
    """A handler's result as JSON text the results table can store, or InvalidArgument naming `result`."""
    return check_json(
        result,
        "result",
        max_bytes,
        canonical=False,
        size_fix="store large outputs elsewhere and return a reference",
        types_fix="return JSON types only",
    )


def result_problem(result: Any, max_bytes: int = MAX_RESULT_BYTES) -> str | None:
    """None if `result` can be stored as a job's result, else why not (for last_error)."""
    try:
        result_json(result, max_bytes)
    except InvalidArgument as exc:
        return f"handler returned a result that cannot be stored: {exc}"
    return None
