"""quoted(): how every error message shows a value it refuses (pure, a table of cases)."""

from __future__ import annotations

from typing import Any

import pytest

from pgwork.quoting import LIMIT, inert, quoted


class HostileRepr:
    def __repr__(self) -> str:
        raise RuntimeError("a repr that fails")


@pytest.mark.parametrize(
    ("value", "limit", "expected"),
    [
        ("30x", LIMIT, "'30x'"),
        (17, LIMIT, "17"),
        (None, LIMIT, "None"),
        ("\u0663s", LIMIT, "'\\u0663s'"),  # an Arabic-Indic digit three shows as what it is
        ("\x1b[2Jgone", LIMIT, "'\\x1b[2Jgone'"),  # a terminal escape is shown, not sent
        ("a\x00b", LIMIT, "'a\\x00b'"),
        (b"\xff", LIMIT, "b'\\xff'"),
        ("x" * 100, 20, "'" + "x" * 16 + "..."),
        ("x" * 18, 20, "'" + "x" * 18 + "'"),  # exactly at the limit: whole
        (HostileRepr(), LIMIT, "<HostileRepr>"),
    ],
    ids=["text", "int", "None", "lookalike digit", "escape", "NUL", "bytes", "cut", "at limit", "failing repr"],
)
def test_quoted(value: Any, limit: int, expected: str) -> None:
    assert quoted(value, limit) == expected
    assert len(quoted(value, limit)) <= limit
    assert quoted(value, limit).isascii()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("key 'invoice-1' names no job", "key 'invoice-1' names no job"),
        ("clé 'facture-é' 日本", "clé 'facture-é' 日本"),  # printable scripts stay as they read
        ("key '\u202ekey'", "key '\\u202ekey'"),  # a bidi override is written as its escape
        ("a\x1b[2Jb", "a\\x1b[2Jb"),
        ("a\x00b\nc", "a\\x00b\\nc"),
    ],
    ids=["plain", "accents", "bidi", "escape", "NUL and newline"],
)
def test_inert(text: str, expected: str) -> None:
    assert inert(text) == expected


def test_a_huge_value_costs_a_short_line() -> None:
    shown = quoted("é" * 2_000_000)
    assert len(shown) == LIMIT and shown.endswith("...")
