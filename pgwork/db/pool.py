"""The Queue's connection pool: autocommit connections checked without a round trip, and waits
for a free connection that a stopping worker can cut short."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator

import psycopg
from psycopg.errors import Diagnostic
from psycopg_pool import ConnectionPool, PoolTimeout

from pgwork import decoding
from pgwork.db.connect import (
    AnyConnection,
    check_dsn,
    check_idle_connection,
    connection_kwargs,
    first_error_line,
    pooler_needed,
    pooler_symptom,
)
from pgwork.dsn import describe, with_tcp_defaults
from pgwork.errors import Unreachable

# How long a call waits for a pool connection (all busy, or the pool reconnecting) by default.
POOL_TIMEOUT = 30.0
# A wait for a pool connection rechecks the caller's deadline this often, so moving the deadline
# up (a worker told to stop) also shortens waits already in progress.
_WAIT_SLICE = 0.25
_MIN_WAIT = 0.01
# The NOTICE pgwork.claim_limited raises for a limited type it skipped because another session held
# its limit row (migration 0018); the type is in the notice's DETAIL.
LIMIT_SKIPPED = "PW001"


class Pool:
    def __init__(
        self, dsn: str, *, size: int, application_name: str, prepare_threshold: int | None, timeout: float
    ) -> None:
        check_dsn(dsn)  # before the pool's own threads log libpq's text about it
        self.timeout = timeout
        self.prepare_threshold = prepare_threshold
        # The first sign of a transaction-mode pooler met without the setting (see `connection`).
        self.pooler_symptom: str | None = None
        # Called with the job type of each limited type a claim skipped (see LIMIT_SKIPPED).
        self.on_limit_skipped: Callable[[str], None] | None = None
        # Monotonic instant after which no call waits for a connection any more (see give_up_at).
        self._give_up_at: float | None = None
        self._pool: ConnectionPool[AnyConnection] = ConnectionPool(
            with_tcp_defaults(dsn),
            min_size=1,
            max_size=max(1, size),
            kwargs=connection_kwargs(True, application_name, prepare_threshold),
            open=False,
            name=f"{application_name}-pool",
            # A broken connection is replaced, not handed out; the check costs a round trip only
            # when the server has already spoken on the idle socket (FATAL or EOF).
            check=check_idle_connection,
            # Rows Python cannot decode come back as markers, never as an exception mid-fetch.
            configure=self._configure,
        )
        try:
            self._pool.open(wait=True, timeout=timeout)
        except PoolTimeout as exc:
            # The server went away between the caller's check and the pool's first connections.
            self._pool.close(timeout=0)
            raise Unreachable(f"cannot connect to {describe(dsn)}: {first_error_line(exc, dsn)}") from None

    def _configure(self, conn: AnyConnection) -> None:
        decoding.configure(conn)
        conn.add_notice_handler(self._notice)

    def _notice(self, diag: Diagnostic) -> None:
        callback = self.on_limit_skipped
        if callback is not None and diag.sqlstate == LIMIT_SKIPPED:
            callback(diag.message_detail or "")

    def close(self, timeout: float) -> None:
        self._pool.close(timeout=max(0.0, timeout))

    def give_up_at(self, deadline: float | None) -> None:
        self._give_up_at = deadline

    def _getconn(self) -> AnyConnection:
        started = time.monotonic()
        limit = started + self.timeout
        while True:
            give_up = self._give_up_at
            end = limit if give_up is None else min(limit, give_up)
            # Past the deadline an idle connection is still taken; only waiting is cut short.
            wait = max(_MIN_WAIT, min(end - time.monotonic(), _WAIT_SLICE))
            try:
                return self._pool.getconn(timeout=wait)
            except PoolTimeout:
                now = time.monotonic()
                if now >= end:
                    raise PoolTimeout(f"couldn't get a connection after {now - started:.2f} sec") from None

    @contextlib.contextmanager
    def connection(self, conn: AnyConnection | None = None) -> Iterator[AnyConnection]:
        """`conn` as given (the caller's transaction), else a pooled one committed on leaving.
        A transaction-mode pooler's symptom (a prepared statement lost between transactions)
        turns prepared statements off for good and raises PoolerNeeded, which names the setting;
        the same call then succeeds when repeated, so a worker can still release what it holds."""
        try:
            if conn is not None:
                yield conn
                return
            pooled = self._getconn()
            pooled.prepare_threshold = self.prepare_threshold
            try:
                with pooled:  # as the pool's own connection(): commit or roll back, never close
                    yield pooled
            finally:
                self._pool.putconn(pooled)
        except psycopg.Error as exc:
            if not pooler_symptom(exc):
                raise
            if conn is not None:
                conn.prepare_threshold = None
            raise self.pooler_met(exc) from None

    def pooler_met(self, exc: Exception) -> Exception:
        """`exc` as the caller should see it: a pooler's symptom turns prepared statements off for
        good and becomes PoolerNeeded (naming the setting); anything else is returned as it is.
        For errors the connection's user catches itself (a claim that failed after the finishes
        committed, pgwork.db.roundtrip), which `connection` never sees."""
        if not pooler_symptom(exc):
            return exc
        self.prepare_threshold = None
        error = pooler_needed(exc)
        self.pooler_symptom = self.pooler_symptom or str(error)
        return error
