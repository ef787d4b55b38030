"""Running the named statements of pgwork/sql/queries.sql, each by the row shape its block
declares (`-- name: claim :many`): `many` and `one` map rows onto a frozen dataclass by column
name (or a NamedTuple by position, its names checked first), `scalar` returns the first column
of the first row, `execute` returns nothing, `copy` opens a COPY FROM STDIN to write rows
into. Running a statement under another shape than it declares is an error, so the tag cannot
drift. The `a`-prefixed runners do the same
on a psycopg AsyncConnection (the AsyncQueue's), with the same statements."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from functools import cache
from typing import Any, LiteralString, TypeVar

from psycopg import AsyncConnection, Connection, Copy, Cursor
from psycopg._cursor_base import BaseCursor
from psycopg.pq.abc import PGresult
from psycopg.rows import RowFactory, RowMaker, class_row, tuple_row

from pgwork import sql_files

T = TypeVar("T")
Params = Mapping[str, Any] | None


def statement(name: str, shape: str) -> LiteralString:
    declared = sql_files.CORE.shape(name)
    if declared != shape:
        raise ValueError(f"query {name!r} is declared :{declared} in pgwork/sql/queries.sql, but run as :{shape}")
    return sql_files.query(name)


def row_factory(row: type[T]) -> RowFactory[T]:
    """class_row for a dataclass; for a NamedTuple, rows built by position (no keyword dict per
    row) once the statement's column names are checked against its fields, so a renamed or
    reordered column still fails loudly."""
    if getattr(row, "_fields", None) is None:
        return class_row(row)

    def by_position(cur: BaseCursor[Any, Any]) -> RowMaker[T]:
        return positional(row, cur.pgresult)

    return by_position


def positional(row: type[T], res: PGresult | None) -> RowMaker[T]:
    """How a NamedTuple `row` is built from one of `res`'s rows, by position, once the answer's
    column names are checked against its fields (a ValueError names both)."""
    fields: tuple[str, ...] = row._fields  # type: ignore[attr-defined]
    # The names as the server sends them (ASCII identifiers): compared without building the
    # cursor's description, whose Column objects cost a one-job claim more than its row.
    names = tuple(map(res.fname, range(res.nfields))) if res is not None else ()
    if names and names != _encoded(fields)[: len(names)]:
        answered = tuple((n or b"").decode(errors="replace") for n in names)
        raise ValueError(f"{row.__name__} expects columns {fields}, the statement answered {answered}")
    # Fewer columns (an older schema's answer): the fields after them take their defaults.
    make: Callable[[Sequence[Any]], T] = row._make  # type: ignore[attr-defined]
    return make if len(names) == len(fields) else lambda values: row(*values)


@cache
def _encoded(fields: tuple[str, ...]) -> tuple[bytes, ...]:
    return tuple(f.encode() for f in fields)


def many(conn: Connection[Any], name: str, params: Params, row: type[T], *, binary: bool = False) -> list[T]:
    """`binary`: the answer in PostgreSQL's binary format (timestamps, uuids and integers
    decode without parsing text: a claim's rows decode in about half the time)."""
    with conn.cursor(row_factory=row_factory(row), binary=binary) as cur:
        cur.execute(statement(name, "many"), params)
        return cur.fetchall()


def one(conn: Connection[Any], name: str, params: Params, row: type[T]) -> T | None:
    """The statement's row, or None when it matched nothing (a lost lease, an unknown id)."""
    with conn.cursor(row_factory=class_row(row)) as cur:
        cur.execute(statement(name, "one"), params)
        return cur.fetchone()


def column(conn: Connection[Any], name: str, params: Params) -> list[Any]:
    """The first column of every row of a :many statement (no row objects: a bulk insert
    returns a million ids)."""
    with conn.cursor(row_factory=tuple_row) as cur:
        cur.execute(statement(name, "many"), params)
        return [r[0] for r in cur.fetchall()]


def scalar(conn: Connection[Any], name: str, params: Params = None) -> Any:
    with conn.cursor(row_factory=tuple_row) as cur:
        cur.execute(statement(name, "scalar"), params)
        found = cur.fetchone()
        return found[0] if found else None


def execute(conn: Connection[Any], name: str, params: Params = None) -> None:
    with conn.cursor() as cur:
        cur.execute(statement(name, "exec"), params)


def copy(cur: Cursor[Any], name: str) -> AbstractContextManager[Copy]:
    """The COPY FROM STDIN of `name` on `cur`, as a context manager to write rows into."""
    return cur.copy(statement(name, "copy"))


async def amany(conn: AsyncConnection[Any], name: str, params: Params, row: type[T]) -> list[T]:
    async with conn.cursor(row_factory=class_row(row)) as cur:
        await cur.execute(statement(name, "many"), params)
        return await cur.fetchall()


async def aone(conn: AsyncConnection[Any], name: str, params: Params, row: type[T]) -> T | None:
    async with conn.cursor(row_factory=class_row(row)) as cur:
        await cur.execute(statement(name, "one"), params)
        return await cur.fetchone()


async def ascalar(conn: AsyncConnection[Any], name: str, params: Params = None) -> Any:
    async with conn.cursor(row_factory=tuple_row) as cur:
        await cur.execute(statement(name, "scalar"), params)
        found = await cur.fetchone()
        return found[0] if found else None


async def aexecute(conn: AsyncConnection[Any], name: str, params: Params = None) -> None:
    async with conn.cursor() as cur:
        await cur.execute(statement(name, "exec"), params)
