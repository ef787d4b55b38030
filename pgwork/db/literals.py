"""Arguments written into a statement's text as SQL literals, for the one-message finish-and-claim
(pgwork.db.roundtrip), without psycopg's adaptation machinery.

A simple-query message carries no arguments of its own, so pgwork.db.roundtrip binds them into the
text. psycopg's ClientCursor.mogrify does that for any value, and at a batch of one it was the
largest client cost of a job after the round trip itself: ~120 us a message on this 2-core host
(two statements; the list dumpers look up a dumper per element type, per call). The arguments
these statements take are few and simple: integers, floats, texts, UUIDs, NULL, and lists of
them. `bind` writes those, texts by the escaping function it is given (libpq's
PQescapeLiteral, which quotes by the connection's encoding and standard_conforming_strings), and
answers None for anything else, so the caller falls back to mogrify and nothing changes meaning.

Pure: no connection here, only the escape function.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from functools import cache
from typing import Any
from uuid import UUID

# libpq's PQescapeLiteral: bytes in, a quoted literal out ('...' or E'...').
Escape = Callable[[bytes], bytes]

_PLACEHOLDER = re.compile(r"%\((\w+)\)s|%")


@cache
def template(text: str) -> tuple[tuple[bytes, ...], tuple[str, ...]] | None:
    """`text` (a named statement with %(name)s placeholders) split at its placeholders: the
    pieces around them and the names, in order. None when the text holds anything else that
    psycopg would read as a placeholder (%%, %(name)b, a bare %): left to mogrify."""
    pieces: list[bytes] = []
    names: list[str] = []
    at = 0
    for m in _PLACEHOLDER.finditer(text):
        if m.group(1) is None:
            return None
        pieces.append(text[at : m.start()].encode())
        names.append(m.group(1))
        at = m.end()
    pieces.append(text[at:].encode())
    return tuple(pieces), tuple(names)


def bind(text: str, params: Mapping[str, Any], escape: Escape, encoding: str) -> bytes | None:
    """The statement `text` with `params` written in as literals, or None if a value is not one
    `literal` writes (the caller then binds by mogrify)."""
    split = template(text)
    if split is None:
        return None
    pieces, names = split
    out = [pieces[0]]
    for name, piece in zip(names, pieces[1:], strict=True):
        if name not in params:
            return None
        value = literal(params[name], escape, encoding)
        if value is None:
            return None
        out += (value, piece)
    return b"".join(out)


def literal(value: Any, escape: Escape, encoding: str) -> bytes | None:
    """One argument as SQL text: NULL, an integer, a finite float, a quoted text or UUID, or a list
    of one of those (an ARRAY[...] of them; '{}' when empty). None: not one of these (a bool, a
    NaN, a text with a NUL, a datetime, a mixed list...)."""
    if value is None:
        return b"NULL"
    kind = type(value)
    if kind is list:
        return _array(value, escape, encoding)
    return _scalar(value, kind, escape, encoding)


def _scalar(value: Any, kind: type, escape: Escape, encoding: str) -> bytes | None:
    if kind is int or kind is float:
        # repr is exact (a float round-trips). A negative number is parenthesised: after a minus
        # in the text, "-1" would make "--", a comment. NaN and the infinities go to mogrify.
        if kind is float and not math.isfinite(value):
            return None
        text = repr(value).encode()
        return b"(" + text + b")" if text.startswith(b"-") else text
    if kind is str:
        try:
            data = value.encode(encoding)
        except UnicodeEncodeError:  # a lone surrogate, or a character the encoding lacks
            return None
        # PQescapeLiteral stops at a NUL; PostgreSQL text cannot hold one either: mogrify
        # refuses it with psycopg's own error.
        return None if b"\x00" in data else escape(data)
    if kind is UUID:
        return b"'" + str(value).encode() + b"'"
    return None


def _array(values: list[Any], escape: Escape, encoding: str) -> bytes | None:
    """Elements of one type (and NULLs): a list that mixes types is psycopg's to refuse or adapt."""
    if not values:
        return b"'{}'"
    parts = []
    first: type | None = None
    for v in values:
        if v is None:
            parts.append(b"NULL")
            continue
        kind = type(v)
        if first is None:
            first = kind
        part = _scalar(v, kind, escape, encoding) if kind is first else None
        if part is None:
            return None
        parts.append(part)
    return b"ARRAY[" + b",".join(parts) + b"]"
