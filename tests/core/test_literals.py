"""pgwork.db.literals: the one-message finish-and-claim's arguments written as SQL literals. Table
cases for what it writes and what it leaves to mogrify, then the server reading hostile values back
exactly as given, through libpq's own escaping."""

from __future__ import annotations

import uuid
from typing import Any

import psycopg
import pytest
from psycopg import pq
from psycopg.types.json import Jsonb

from pgwork.db import literals


def quote(data: bytes) -> bytes:
    """A stand-in for PQescapeLiteral with standard_conforming_strings on (pure tests)."""
    return b"'" + data.replace(b"'", b"''") + b"'"


U = uuid.UUID("12345678-1234-5678-1234-567812345678")


@pytest.mark.parametrize(
    ("value", "written"),
    [
        (None, b"NULL"),
        (0, b"0"),
        (42, b"42"),
        (-7, b"(-7)"),  # after a minus in the text, -7 would start a comment
        (30.0, b"30.0"),
        (-0.25, b"(-0.25)"),
        (1e-05, b"1e-05"),
        (2**70, str(2**70).encode()),
        ("w", b"'w'"),
        ("it's", b"'it''s'"),
        ("", b"''"),
        (U, b"'12345678-1234-5678-1234-567812345678'"),
        ([], b"'{}'"),
        ([1, 2, 3], b"ARRAY[1,2,3]"),
        (["a", None, "b'c"], b"ARRAY['a',NULL,'b''c']"),
        ([1.5, -2.0], b"ARRAY[1.5,(-2.0)]"),
        (-0.0, b"(-0.0)"),
        ([None, None], b"ARRAY[NULL,NULL]"),
        ([U], b"ARRAY['12345678-1234-5678-1234-567812345678']"),
    ],
)
def test_what_is_written(value: Any, written: bytes) -> None:
    assert literals.literal(value, quote, "utf-8") == written


@pytest.mark.parametrize(
    "value",
    [
        True,  # an int to Python, a boolean to psycopg
        [1, True],
        float("nan"),
        float("inf"),
        [float("-inf")],
        "nul \x00 inside",
        ["fine", "nul\x00"],
        "lone \ud800 surrogate",
        b"bytes",
        {"a": 1},
        [[1, 2]],
        [1, "a"],  # mixed types: psycopg's to refuse
        [1, 1.5],
        Jsonb({"n": 1}),  # psycopg's dumper decides
        Jsonb('{"n": 1}', dumps=str),
        3 + 4j,
    ],
    ids=repr,
)
def test_what_is_left_to_mogrify(value: Any) -> None:
    assert literals.literal(value, quote, "utf-8") is None


@pytest.mark.parametrize(
    ("text", "params", "written"),
    [
        ("SELECT %(a)s::int", {"a": 1}, b"SELECT 1::int"),
        ("SELECT f(%(a)s, %(b)s, %(a)s)", {"a": "x", "b": None}, b"SELECT f('x', NULL, 'x')"),
        ("SELECT 1", {}, b"SELECT 1"),
        ("SELECT %(a)s", {}, None),  # an argument missing: mogrify says which
        ("SELECT %(a)s", {"a": True}, None),
        ("SELECT 100%% FROM t WHERE x = %(a)s", {"a": 1}, None),  # %%: psycopg's to read
        ("SELECT %(a)b", {"a": 1}, None),
        ("SELECT %s", {}, None),
    ],
)
def test_a_statement_is_bound_or_left_to_mogrify(text: str, params: dict[str, Any], written: bytes | None) -> None:
    assert literals.bind(text, params, quote, "utf-8") == written


HOSTILE = [
    "plain",
    "it's",
    "back\\slash \\' and \\\\",
    "'); DROP TABLE pgwork.jobs; --",
    "$$ dollar $tag$ quotes $$",
    "-- a comment\n/* another */",
    "naïve ☃ 𝄞 \u202e",
    "\t\r\n\x1b[31m",
    "%(name)s %s %%",
]


@pytest.mark.parametrize("scs", ["on", "off"])
def test_the_server_reads_back_every_value_as_given(dsn: str, scs: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"SET standard_conforming_strings = {scs}")
        escape = pq.Escaping(conn.pgconn).escape_literal
        params: dict[str, Any] = {
            "texts": HOSTILE,
            "one": HOSTILE[3],
            "ids": [1, -2, 2**62],
            "tokens": [U, uuid.uuid4()],
            "floats": [0.1, -1e300, 30.0],
            # JSON texts, as the worker's results go (cast by the statement).
            "json": ['{"k": "it\'s \\\\ \\"q\\" \\u00e9"}', "[1, null]"],
            "none": None,
            "empty": [],
        }
        text = (
            "SELECT %(texts)s::text[], %(one)s::text, %(ids)s::bigint[], %(tokens)s::uuid[], "
            "%(floats)s::float8[], %(json)s::jsonb[], %(none)s::text, %(empty)s::text[]"
        )
        bound = literals.bind(text, params, escape, conn.info.encoding)
        assert bound is not None
        row = conn.execute(bound.decode()).fetchone()
    assert row is not None
    assert row[0] == HOSTILE and row[1] == HOSTILE[3]
    assert row[2] == params["ids"] and row[3] == params["tokens"] and row[4] == params["floats"]
    assert row[5] == [{"k": 'it\'s \\ "q" é'}, [1, None]]
    assert row[6] is None and row[7] == []
