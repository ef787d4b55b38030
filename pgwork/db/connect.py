"""Opening connections: TCP keepalives, the decoding loaders, and libpq's failures mapped onto
pgwork's errors (one line each, never a password)."""

from __future__ import annotations

import select
from typing import Any

import psycopg
from psycopg import Connection
from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool

from pgwork import decoding
from pgwork.db import statements
from pgwork.dsn import describe, redact, with_tcp_defaults
from pgwork.errors import AccessDenied, BadConnectionString, EncodingRefused, Unreachable

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
    dsn: str, *, autocommit: bool = True, application_name: str = "pgwork", connect_timeout: int = 10
) -> AnyConnection:
    """A new connection, with failures turned into one clear line that never shows a password."""
    try:
        conn: AnyConnection = psycopg.connect(
            with_tcp_defaults(dsn),
            autocommit=autocommit,
            application_name=application_name,
            connect_timeout=connect_timeout,
            row_factory=dict_row,
        )
    except psycopg.ProgrammingError as exc:  # malformed connection string
        raise BadConnectionString(f"invalid connection string: {redact(str(exc)).strip()}") from None
    except psycopg.OperationalError as exc:
        first = first_error_line(exc)
        text = str(exc).lower()
        if any(marker in text for marker in _MALFORMED):
            raise BadConnectionString(f"invalid connection string for {describe(dsn)}: {first}") from None
        if any(marker in text for marker in _REFUSED):
            raise AccessDenied(
                f"cannot connect to {describe(dsn)}: {first} (fix the user, password or database name in the "
                "connection string or the Secret it comes from; retrying will not help)"
            ) from None
        raise Unreachable(f"cannot connect to {describe(dsn)}: {first}") from None
    decoding.configure(conn)
    return conn


def check_encoding(conn: AnyConnection) -> None:
    value = statements.scalar(conn, "server_encoding")
    # Under SQL_ASCII psycopg hands text back as bytes, this very value included.
    encoding = value.decode("ascii", "replace") if isinstance(value, bytes) else str(value)
    if encoding.upper() not in ("UTF8", "UTF-8"):
        dbname = conn.info.dbname
        raise EncodingRefused(
            f"database {dbname!r} uses encoding {encoding}; pgwork needs UTF8 (under {encoding} text comes "
            f"back as bytes and status comparisons silently fail). Create one with: "
            f"CREATE DATABASE {dbname}_utf8 ENCODING 'UTF8' TEMPLATE template0"
        )


def first_error_line(exc: BaseException) -> str:
    text = redact(str(exc)).strip()
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
