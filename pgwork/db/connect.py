"""Opening connections: TCP keepalives, the decoding loaders, and libpq's failures mapped onto
pgwork's errors (one line each, never a password)."""

from __future__ import annotations

import select
from typing import Any

import psycopg
from psycopg import AsyncConnection, Connection
from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool

from pgwork import decoding
from pgwork.credentials import dsn_error, scrub
from pgwork.db import statements
from pgwork.dsn import describe, with_tcp_defaults
from pgwork.errors import AccessDenied, BadConnectionString, EncodingRefused, PoolerNeeded, Unreachable

AnyConnection = Connection[Any]

# libpq's words for failures that no retry can fix. Anything else (refused, timed out, the
# server starting up or shutting down) is Unreachable, which callers may retry.
_MALFORMED = (
    "invalid integer value",
    "invalid connection option",
    "invalid uri",
    'missing "=" after',
    "invalid sslmode",
)
_REFUSED = (
    "password authentication failed",
    "no pg_hba.conf entry",
    "fe_sendauth: no password supplied",
    "does not exist",  # role "x" does not exist / database "x" does not exist
)


def connect(
    dsn: str,
    *,
    autocommit: bool = True,
    application_name: str = "pgwork",
    connect_timeout: int = 10,
    prepare: bool = True,
) -> AnyConnection:
    """A new connection, with failures turned into one clear line that never shows a password."""
    check_dsn(dsn)
    try:
        conn: AnyConnection = psycopg.connect(
            with_tcp_defaults(dsn),
            **connection_kwargs(autocommit, application_name, PREPARE_THRESHOLD if prepare else None),
            connect_timeout=connect_timeout,
        )
    except (psycopg.ProgrammingError, psycopg.OperationalError) as exc:
        raise connect_error(dsn, exc) from None
    decoding.configure(conn)
    return conn


async def aconnect(
    dsn: str,
    *,
    autocommit: bool = True,
    application_name: str = "pgwork",
    connect_timeout: int = 10,
    prepare: bool = True,
) -> AsyncConnection[Any]:
    """`connect` for asyncio: the same keepalives, loaders and one-line errors."""
    check_dsn(dsn)
    try:
        conn: AsyncConnection[Any] = await AsyncConnection.connect(
            with_tcp_defaults(dsn),
            **connection_kwargs(autocommit, application_name, PREPARE_THRESHOLD if prepare else None),
            connect_timeout=connect_timeout,
        )
    except (psycopg.ProgrammingError, psycopg.OperationalError) as exc:
        raise connect_error(dsn, exc) from None
    decoding.configure(conn)
    return conn


# psycopg prepares a statement server-side on its 5th run on one connection; None never does
# (what a transaction-mode pooler needs: the next transaction may run on another backend).
PREPARE_THRESHOLD = 5


def connection_kwargs(
    autocommit: bool, application_name: str, prepare_threshold: int | None = PREPARE_THRESHOLD
) -> dict[str, Any]:
    """What every pgwork connection (direct or pooled, sync or async) is opened with."""
    return {
        "autocommit": autocommit,
        "application_name": application_name,
        "row_factory": dict_row,
        "prepare_threshold": prepare_threshold,
    }


def check_dsn(dsn: str) -> None:
    """BadConnectionString, quoting nothing of `dsn`, for a value libpq would misread: a bare
    password, or a password whose unencoded @ / or space would land in the host, port or database
    name (and from there in libpq's messages and the pool's log). Checked before anything connects."""
    problem = dsn_error(dsn)
    if problem is not None:
        raise BadConnectionString(f"invalid connection string: {problem}")


def connect_error(dsn: str, exc: psycopg.Error) -> Unreachable:
    """libpq's failure to connect as pgwork's error: one line, nothing of the connection string's secret."""
    if isinstance(exc, psycopg.ProgrammingError):  # malformed connection string
        return BadConnectionString(f"invalid connection string: {scrub(str(exc), dsn).strip()}")
    first = first_error_line(exc, dsn)
    text = str(exc).lower()
    if any(marker in text for marker in _MALFORMED):
        return BadConnectionString(f"invalid connection string for {describe(dsn)}: {first}")
    if any(marker in text for marker in _REFUSED):
        return AccessDenied(
            f"cannot connect to {describe(dsn)}: {first} (fix the user, password or database name in the "
            "connection string or the Secret it comes from; retrying will not help)"
        )
    return Unreachable(f"cannot connect to {describe(dsn)}: {first}")


POOLER_FIX = (
    "set PGWORK_POOLER=transaction (`--pooler transaction`, `spec.database.pooler: transaction` in a JobQueue), "
    "or use PgBouncer >= 1.21 with max_prepared_statements > 0"
)


def pooler_symptom(exc: BaseException) -> bool:
    """Whether `exc` is what a transaction-mode pooler does to a session's server-side prepared
    statements: the next transaction ran on a server connection that lacks them, or already
    has one of that name, or binds another statement's parameters to it (pure)."""
    if isinstance(exc, psycopg.errors.InvalidSqlStatementName | psycopg.errors.DuplicatePreparedStatement):
        return True
    return isinstance(exc, psycopg.errors.ProtocolViolation) and "prepared statement" in str(exc)


def pooler_needed(exc: BaseException) -> PoolerNeeded:
    return PoolerNeeded(
        f"the connection goes through a transaction-mode pooler ({first_error_line(exc)}); {POOLER_FIX}"
    )


def check_encoding(conn: AnyConnection) -> None:
    check_encoding_value(statements.scalar(conn, "server_encoding"), conn.info.dbname)


def check_encoding_value(value: Any, dbname: str) -> None:
    """EncodingRefused unless `value` (the server_encoding the server reported) is UTF8."""
    # Under SQL_ASCII psycopg hands text back as bytes, this very value included.
    encoding = value.decode("ascii", "replace") if isinstance(value, bytes) else str(value)
    if encoding.upper() not in ("UTF8", "UTF-8"):
        raise EncodingRefused(
            f"database {dbname!r} uses encoding {encoding}; pgwork needs UTF8 (under {encoding} text comes "
            f"back as bytes and status comparisons silently fail). Create one with: "
            f"CREATE DATABASE {dbname}_utf8 ENCODING 'UTF8' TEMPLATE template0"
        )


def first_error_line(exc: BaseException, dsn: str | None = None) -> str:
    """The first line of an error's text, scrubbed of the password of `dsn` (and of any other)."""
    text = scrub(str(exc), dsn).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def check_idle_connection(conn: AnyConnection) -> None:
    """The pool's check before handing out a connection, without a round trip when it can.

    An idle pool connection (no LISTEN, no query in flight) has nothing to read unless the
    server spoke first: a terminated backend's FATAL message, a shutdown, a pooler closing it.
    So a silent socket is trusted and only a readable one pays for a round-trip check; under
    load the round trip was half the cost of a claim (see docs/benchmarks.md).
    """
    if conn.closed or conn.broken:
        raise psycopg.OperationalError("the connection is closed")
    readable, _, _ = select.select([conn.fileno()], [], [], 0)
    if readable:
        ConnectionPool.check_connection(conn)
