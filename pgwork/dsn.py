"""Where the database is: --dsn, else DATABASE_URL, else libpq's PG* variables."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from psycopg.conninfo import conninfo_to_dict, make_conninfo

from pgwork.credentials import dsn_problem, scrub
from pgwork.errors import InvalidArgument

POOLER_ENV = "PGWORK_POOLER"
LISTEN_DSN_ENV = "PGWORK_LISTEN_DSN"
TRANSACTION = "transaction"
# What PGWORK_POOLER / --pooler / spec.database.pooler accept; "none" and "session" (a session-mode
# pooler keeps a server connection per client, so nothing changes) mean a direct connection.
POOLER_VALUES = ("none", "session", TRANSACTION)


def resolve_dsn(flag: str | None, environ: Mapping[str, str] = os.environ) -> str:
    """The connection string to use. An empty string lets libpq read PGHOST, PGUSER, ..."""
    if flag:
        return flag
    return environ.get("DATABASE_URL", "")


# The libpq variables that say where to connect; with none of them (and no connection string)
# libpq picks everything itself.
LIBPQ_WHERE = ("PGHOST", "PGHOSTADDR", "PGPORT", "PGDATABASE", "PGUSER", "PGSERVICE", "PGSERVICEFILE")


def default_database_note(dsn: str, environ: Mapping[str, str], os_user: str) -> str | None:
    """What to tell someone who named no database at all (pure): which one libpq will use, so
    that "no pgwork schema; run pgwork migrate" is not the first thing they learn about it.
    None when a connection string or a libpq variable says where."""
    if dsn or any(environ.get(name) for name in LIBPQ_WHERE):
        return None
    return (
        f"no --dsn, DATABASE_URL or PG* variable given: using libpq's defaults, database {os_user!r} as user "
        f"{os_user!r} on the local socket, port 5432 (set DATABASE_URL to choose another)"
    )


@dataclass(frozen=True)
class Pooling:
    """How pgwork's connections reach PostgreSQL. Through a transaction-mode pooler (PgBouncer
    `pool_mode = transaction`) each transaction may run on another server connection, so nothing
    may outlive one: no server-side prepared statements, no LISTEN (a notification would reach
    whichever client holds that server connection next), no SET, no session advisory locks, no
    temporary table across transactions. `listen_dsn`, a direct connection string (around the
    pooler), brings LISTEN back for wake-ups only."""

    mode: str | None = None
    listen_dsn: str | None = None

    @property
    def prepares(self) -> bool:
        """Whether long-lived connections may use server-side prepared statements."""
        return self.mode != TRANSACTION

    def listen_target(self, dsn: str) -> str | None:
        """The connection string to LISTEN on, or None: poll only."""
        return dsn if self.mode != TRANSACTION else self.listen_dsn

    def describe(self) -> str:
        if self.mode != TRANSACTION:
            return "direct"
        return f"{POOLER_ENV}={TRANSACTION}" + (f", LISTEN via {LISTEN_DSN_ENV}" if self.listen_dsn else "")


def resolve_pooling(
    pooler: str | None = None,
    listen_dsn: str | None = None,
    environ: Mapping[str, str] = os.environ,
    field: str = "pooler",
) -> Pooling:
    """The Pooling from the arguments given, else PGWORK_POOLER and PGWORK_LISTEN_DSN."""
    given = pooler if pooler is not None else environ.get(POOLER_ENV, "")
    value = given.strip().lower() or "none"
    if value not in POOLER_VALUES:
        raise InvalidArgument(
            field if pooler is not None else POOLER_ENV,
            f"{given!r} is not a pooler mode",
            f"use {TRANSACTION} behind a transaction-mode pooler (PgBouncer pool_mode = transaction), else none",
        )
    direct = listen_dsn if listen_dsn is not None else environ.get(LISTEN_DSN_ENV, "")
    return Pooling(TRANSACTION if value == TRANSACTION else None, direct or None)


INVALID = "<invalid connection string>"


def _params(dsn: str) -> dict[str, Any] | None:
    """libpq's reading of a connection string, or None for one it (or dsn_problem) refuses."""
    if dsn.strip() and dsn_problem(dsn) is not None:
        return None
    try:
        return conninfo_to_dict(dsn)
    except Exception:
        return None


def describe(dsn: str) -> str:
    """A safe one-line name for a database, for messages: user@host:port/dbname. Nothing of a
    value that is not a connection string, and no run of its password's characters."""
    params = _params(dsn)
    if params is None:
        return INVALID
    user = params.get("user") or os.environ.get("PGUSER", "")
    return scrub(f"{user}@{database_of(dsn)}", dsn)


def database_of(dsn: str) -> str:
    """The database a connection string names, whoever connects: host:port/dbname (no user, no
    password), so two roles' strings for one database name it alike."""
    params = _params(dsn)
    if params is None:
        return INVALID
    user = params.get("user") or os.environ.get("PGUSER", "")
    host = params.get("host") or os.environ.get("PGHOST", "") or "localhost"
    port = params.get("port") or os.environ.get("PGPORT", "") or "5432"
    dbname = params.get("dbname") or os.environ.get("PGDATABASE", "") or user
    return scrub(f"{host}:{port}/{dbname}", dsn)


def with_dbname(dsn: str, dbname: str) -> str:
    """The same server with another database name."""
    params = conninfo_to_dict(dsn)
    params["dbname"] = dbname
    return make_conninfo("", **{k: v for k, v in params.items() if v is not None})


# A database host that stops answering (packets dropped, not refused) would otherwise leave a
# connection waiting for as long as the kernel's TCP defaults say: hours. With these a dead peer
# is noticed in about 25 s when idle, and unacknowledged writes fail after 30 s. They apply to
# TCP only (libpq ignores them on Unix sockets); a value set in the connection string wins.
TCP_DEFAULTS: dict[str, str] = {
    "keepalives": "1",
    "keepalives_idle": "10",
    "keepalives_interval": "5",
    "keepalives_count": "3",
    "tcp_user_timeout": "30000",
}


def with_tcp_defaults(dsn: str) -> str:
    """`dsn` plus the keepalive settings it does not set itself; unchanged when it cannot be
    parsed (connecting then reports the problem)."""
    try:
        given = conninfo_to_dict(dsn)
    except Exception:
        return dsn
    missing = {k: v for k, v in TCP_DEFAULTS.items() if k not in given}
    return make_conninfo(dsn, **missing) if missing else dsn
