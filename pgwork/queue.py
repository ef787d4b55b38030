"""The Queue: the only place pgwork talks to PostgreSQL.

Every method is one short transaction (most are one statement, run in autocommit) so no
transaction ever stays open while a job's work runs. Writes about a running job are fenced by
its per-claim lease token. Statements come from `pgwork/sql/queries.sql` by name.
"""

from __future__ import annotations

import contextlib
import logging
import re
import select
import time
import uuid
from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime, timedelta
from typing import Any, LiteralString

import psycopg
from psycopg import Connection
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb
from psycopg_pool import ConnectionPool, PoolTimeout

from pgwork import decoding, sql_files
from pgwork.backoff import Backoff
from pgwork.dsn import describe, redact, with_tcp_defaults
from pgwork.errors import (
    AccessDenied,
    BadConnectionString,
    EncodingRefused,
    InvalidArgument,
    NotMigrated,
    SchemaTooNew,
    Unreachable,
)
from pgwork.models import (
    CancelReport,
    ClaimedJob,
    Completion,
    FailOutcome,
    Failure,
    Lease,
    LeaseState,
    NewJob,
    Reclaimed,
    TypeStats,
)
from pgwork.validation import (
    DEFAULT_MAX_PAYLOAD_BYTES,
    check_age,
    check_id,
    check_ids,
    check_int,
    check_job_types,
    check_text,
    error_text,
    result_json,
    validate,
)

log = logging.getLogger("pgwork.queue")

Row = dict[str, Any]
AnyConnection = Connection[Any]

NOTIFY_CHANNEL = "pgwork_jobs"
# How long a call waits for a pool connection (all busy, or the pool reconnecting) by default.
POOL_TIMEOUT = 30.0
# A wait for a pool connection rechecks the caller's deadline this often, so moving the deadline
# up (a worker told to stop) also shortens waits already in progress.
_WAIT_SLICE = 0.25
_MIN_WAIT = 0.01


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
        first = redact(str(exc)).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
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


def check_encoding(conn: AnyConnection) -> None:
    row = conn.execute(sql_files.query("server_encoding")).fetchone()
    value = row["server_encoding"] if row else "unknown"
    # Under SQL_ASCII psycopg hands text back as bytes, this very value included.
    encoding = value.decode("ascii", "replace") if isinstance(value, bytes) else str(value)
    if encoding.upper() not in ("UTF8", "UTF-8"):
        dbname = conn.info.dbname
        raise EncodingRefused(
            f"database {dbname!r} uses encoding {encoding}; pgwork needs UTF8 (under {encoding} text comes "
            f"back as bytes and status comparisons silently fail). Create one with: "
            f"CREATE DATABASE {dbname}_utf8 ENCODING 'UTF8' TEMPLATE template0"
        )


def schema_version(conn: AnyConnection) -> int:
    present = conn.execute(sql_files.query("schema_exists")).fetchone()
    if not present or not present["present"]:
        return 0
    row = conn.execute(sql_files.query("schema_version")).fetchone()
    return int(row["version"]) if row else 0


def check_schema(conn: AnyConnection) -> None:
    version = schema_version(conn)
    latest = sql_files.latest_version()
    if version == 0:
        raise NotMigrated(f"database {conn.info.dbname!r} has no pgwork schema; run `pgwork migrate` first")
    if version > latest:
        raise SchemaTooNew(
            f"database {conn.info.dbname!r} is at pgwork schema version {version}, but this pgwork "
            f"knows only up to {latest}; upgrade pgwork (never run an older pgwork against it)"
        )
    if version < latest:
        raise NotMigrated(
            f"database {conn.info.dbname!r} is at pgwork schema version {version} of {latest}; run `pgwork migrate`"
        )


def migrate(dsn: str) -> list[int]:
    """Apply the migrations the database lacks, in one transaction under an advisory lock.

    Ten pods starting at once migrate once: the first takes the lock and applies; the others
    wait on the lock, then find nothing left to do. Returns the versions this call applied.
    A schema already current is a no-op needing no DDL rights (a worker pod's migrate init
    container, run under the worker role, succeeds); a schema behind with a role that cannot
    change it is one line naming the fix.
    """
    latest = sql_files.latest_version()
    with connect(dsn, autocommit=False, application_name="pgwork-migrate") as conn:
        check_encoding(conn)
        conn.commit()
        try:
            current = schema_version(conn)
        except psycopg.errors.InsufficientPrivilege:
            current = -1  # unknown: the lock and the DDL below say whether this role may migrate
        conn.rollback()
        if current > latest:
            raise _too_new(conn, current, latest)
        if current == latest:
            return []
        try:
            with conn.transaction():
                conn.execute(sql_files.query("migrate_lock"))
                conn.execute(sql_files.query("migrate_bootstrap"))
                current = schema_version(conn)
                if current > latest:
                    raise _too_new(conn, current, latest)
                applied: list[int] = []
                for migration in sql_files.migrations():
                    if migration.version <= current:
                        continue
                    conn.execute(migration.sql)
                    conn.execute(
                        sql_files.query("migrate_record"),
                        {"version": migration.version, "name": migration.name},
                    )
                    applied.append(migration.version)
                    log.info("applied migration %04d_%s", migration.version, migration.name)
        except psycopg.errors.InsufficientPrivilege as exc:
            where = f"at pgwork schema version {current} of {latest}" if current >= 0 else "not readable"
            raise NotMigrated(
                f"database {conn.info.dbname!r} is {where} and role {conn.info.user!r} cannot change the schema "
                f"({_first_error_line(exc)}); run `pgwork migrate` as the role that owns schema pgwork"
            ) from None
        return applied


def _too_new(conn: AnyConnection, current: int, latest: int) -> SchemaTooNew:
    return SchemaTooNew(
        f"database {conn.info.dbname!r} is at pgwork schema version {current}, but this "
        f"pgwork knows only up to {latest}; upgrade pgwork"
    )


# Each includes others (see the profile table in migrations/0002_job_life_functions.sql):
# producer and reaper include reader, worker includes producer, maintainer includes reaper.
GRANT_PROFILES = ("reader", "producer", "worker", "reaper", "maintainer")
# PostgreSQL cuts longer identifiers to this many bytes (NAMEDATALEN - 1).
MAX_ROLE_BYTES = 63


def check_grantee(role: str) -> str:
    """The role name `pgwork grant` may grant to, or InvalidArgument naming `role` (pure)."""
    if not isinstance(role, str) or not role.strip():
        raise InvalidArgument("role", "is empty", "name an existing role, e.g. pgwork_worker")
    try:
        size = len(role.encode("utf-8"))
    except UnicodeEncodeError:
        raise InvalidArgument("role", "is not valid text", "name an existing role") from None
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in role):
        raise InvalidArgument("role", "contains a control character", "name an existing role")
    if len(role) >= 2 and role[0] == role[-1] == '"':
        raise InvalidArgument("role", f"{role} is quoted", "give the bare name; pgwork quotes it itself")
    if role.lower() == "public":
        raise InvalidArgument(
            "role", "PUBLIC means every role, not one", "create a role (CREATE ROLE name LOGIN) and grant to it"
        )
    if size > MAX_ROLE_BYTES:
        raise InvalidArgument(
            "role",
            f"is {size} bytes; PostgreSQL cuts names to {MAX_ROLE_BYTES}, so the grant could land on another role",
            f"use a role name of at most {MAX_ROLE_BYTES} bytes",
        )
    if role.startswith("pg_"):
        raise InvalidArgument(
            "role", f"{role!r} is a reserved pg_* role that others are members of", "grant to a role of your own"
        )
    return role


def grant(dsn: str, role: str, profile: str) -> list[str]:
    """Give `role` exactly the privileges of `profile` (and the profiles it includes) on the
    pgwork schema, revoking whatever else it held there. Run as the role that migrated.
    Returns the profiles applied."""
    if profile not in GRANT_PROFILES:
        raise InvalidArgument("profile", f"{profile!r} is not a profile", f"use one of {', '.join(GRANT_PROFILES)}")
    check_grantee(role)
    with connect(dsn, autocommit=False, application_name="pgwork-grant") as conn:
        check_schema(conn)
        facts = conn.execute(sql_files.query("role_facts"), {"role": role}).fetchone()
        if facts is None:
            raise InvalidArgument(
                "role",
                f"there is no role {role!r} on this server",
                "create it first: CREATE ROLE name LOGIN PASSWORD ...",
            )
        if facts["rolsuper"] or facts["has_owner_rights"]:
            what = "is a superuser" if facts["rolsuper"] else "owns schema pgwork or is a member of its owner"
            raise InvalidArgument(
                "role",
                f"{role!r} {what}, so no profile can narrow it",
                "grant to a role of its own, made with CREATE ROLE",
            )
        with conn.transaction():
            row = conn.execute(sql_files.query("grant_profiles"), {"role": role, "profiles": [profile]}).fetchone()
    assert row is not None
    return list(row["applied"])


_CLAIM_BODY = re.compile(r"RETURN QUERY\s+(?P<statement>.*?);\s*END\s*$", re.DOTALL)
_CLAIM_ARGUMENTS = {
    "owner": "%(owner)s::text",
    "job_types": "%(job_types)s::text[]",
    "max_jobs": "%(limit)s::integer",
    "lease_seconds": "%(lease)s::float8",
    "now_": "coalesce(%(now)s::timestamptz, now())",
}
_CLAIM_NAMES = re.compile(r"(?<![\w.])(" + "|".join(_CLAIM_ARGUMENTS) + r")(?!\w)")


def claim_statement(conn: AnyConnection) -> LiteralString:
    """The one statement the installed pgwork.claim runs, read back from the database, with its
    arguments as %(owner)s, %(job_types)s, %(limit)s, %(lease)s and %(now)s: what the plan tests
    and the lab EXPLAIN (EXPLAIN of the function call cannot see inside it)."""
    with conn.cursor(row_factory=dict_row) as cur:
        row = cur.execute(sql_files.query("claim_source")).fetchone()
    assert row is not None
    match = _CLAIM_BODY.search(str(row["prosrc"]))
    if match is None:
        raise ValueError("pgwork.claim no longer has the shape `RETURN QUERY <statement>; END`")
    body = re.sub(r"--[^\n]*", "", match.group("statement"))
    # The text is the body of pgwork's own migration, as installed; never input.
    return _CLAIM_NAMES.sub(lambda m: _CLAIM_ARGUMENTS[m.group(1)], body)


def _optional_types(job_types: Iterable[str] | None) -> list[str] | None:
    return check_job_types(job_types)


def _error_text(error: str) -> str:
    return error_text(error)


class Queue:
    """All database I/O for pgwork, over a small connection pool.

    Methods take an optional `now` (tests pass a fixed instant instead of sleeping) and, where a
    caller may want its own transaction, an optional `conn`: with one, the statement runs on it
    and is committed (or not) by the caller.
    """

    def __init__(
        self,
        dsn: str,
        *,
        pool_size: int = 4,
        backoff: Backoff | None = None,
        max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
        application_name: str = "pgwork",
        check: bool = True,
        prepare: bool = True,
        pool_timeout: float = POOL_TIMEOUT,
    ) -> None:
        self.dsn = dsn
        self.pool_timeout = _check_seconds(pool_timeout, "pool_timeout")
        # Monotonic instant after which no call waits for a connection any more (see give_up_at).
        self._give_up_at: float | None = None
        self.backoff = backoff or Backoff()
        self.max_payload_bytes = max_payload_bytes
        self.application_name = application_name
        # Through a transaction-mode pooler server-side prepared statements may land on
        # another backend; `prepare=False` turns them off.
        self._prepare_threshold: int | None = 5 if prepare else None
        with connect(dsn, application_name=application_name) as conn:
            check_encoding(conn)
            if check:
                check_schema(conn)
        self._pool: ConnectionPool[AnyConnection] = ConnectionPool(
            with_tcp_defaults(dsn),
            min_size=1,
            max_size=max(1, pool_size),
            kwargs={
                "autocommit": True,
                "application_name": application_name,
                "row_factory": dict_row,
                "prepare_threshold": self._prepare_threshold,
            },
            open=False,
            name=f"{application_name}-pool",
            # A broken connection is replaced, not handed out; the check costs a round trip only
            # when the server has already spoken on the idle socket (FATAL or EOF).
            check=check_idle_connection,
            # Rows Python cannot decode come back as markers, never as an exception mid-fetch.
            configure=decoding.configure,
        )
        try:
            self._pool.open(wait=True, timeout=self.pool_timeout)
        except PoolTimeout as exc:
            # The server went away between the check above and the pool's first connections.
            self._pool.close(timeout=0)
            raise Unreachable(f"cannot connect to {describe(dsn)}: {_first_error_line(exc)}") from None

    # -- plumbing -------------------------------------------------------------------------

    def close(self, timeout: float = 5.0) -> None:
        """Close the pool, waiting at most `timeout` seconds for its background threads."""
        self._pool.close(timeout=max(0.0, timeout))

    def give_up_at(self, deadline: float | None) -> None:
        """From now on no call waits for a pool connection past the monotonic `deadline`
        (None: back to `pool_timeout` per call). A stopping worker sets it so that, with the
        database down, its writes fail by its shutdown deadline instead of after pool_timeout.
        Waits already in progress notice within a fraction of a second."""
        self._give_up_at = deadline

    def _getconn(self) -> AnyConnection:
        started = time.monotonic()
        limit = started + self.pool_timeout
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

    def __enter__(self) -> Queue:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextlib.contextmanager
    def _conn(self, conn: AnyConnection | None = None) -> Iterator[AnyConnection]:
        if conn is not None:
            yield conn
            return
        pooled = self._getconn()
        try:
            with pooled:  # as the pool's own connection(): commit or roll back, never close
                yield pooled
        finally:
            self._pool.putconn(pooled)

    def _all(self, name: str, params: dict[str, Any], conn: AnyConnection | None = None) -> list[Row]:
        with self._conn(conn) as c, c.cursor(row_factory=dict_row) as cur:
            cur.execute(sql_files.query(name), params)
            return cur.fetchall() if cur.description else []

    def _one(self, name: str, params: dict[str, Any], conn: AnyConnection | None = None) -> Row | None:
        rows = self._all(name, params, conn)
        return rows[0] if rows else None

    # -- producing ------------------------------------------------------------------------

    def enqueue(
        self,
        job_type: str,
        payload: dict[str, Any] | None = None,
        *,
        key: str | None = None,
        priority: int = 100,
        delay: float | None = None,
        available_at: datetime | None = None,
        max_attempts: int = 5,
        trace_context: dict[str, str] | None = None,
        conn: AnyConnection | None = None,
        now: datetime | None = None,
    ) -> int:
        """Add one job; returns its id. With `conn`, the job exists iff the caller commits."""
        job = NewJob(
            job_type,
            {} if payload is None else payload,
            key,
            priority,
            delay,
            available_at,
            max_attempts,
            trace_context or {},
        )
        return self.enqueue_many([job], conn=conn, now=now)[0]

    def enqueue_many(
        self, jobs: Sequence[NewJob], *, conn: AnyConnection | None = None, now: datetime | None = None
    ) -> list[int]:
        """Add many jobs in one statement. All are validated first: one bad job writes none."""
        rows = [validate(job, self.max_payload_bytes) for job in jobs]
        if not rows:
            return []
        params = {
            "now": now,
            "job_types": [r.job_type for r in rows],
            "payloads": [Jsonb(r.payload_json, dumps=_identity) for r in rows],
            "priorities": [r.priority for r in rows],
            "max_attempts": [r.max_attempts for r in rows],
            "available_ats": [r.available_at for r in rows],
            "delays": [r.delay for r in rows],
            "keys": [r.key for r in rows],
            "trace_contexts": [Jsonb(r.trace_context) for r in rows],
        }
        return [int(r["id"]) for r in self._all("enqueue", params, conn)]

    # -- the job's life -------------------------------------------------------------------

    def claim(
        self,
        owner: str,
        *,
        job_types: Iterable[str] | None = None,
        limit: int = 1,
        lease: float = 30.0,
        now: datetime | None = None,
    ) -> list[ClaimedJob]:
        """Claim up to `limit` ready jobs in one statement, committed before returning."""
        check_text(owner, "owner", "use the pod or host name", max_chars=200)
        check_int(limit, "limit", 1, 10_000, "claim between 1 and 10000 jobs at once")
        if _check_seconds(lease, "lease") <= 0:
            raise InvalidArgument("lease", "must be > 0 seconds", "e.g. 30")
        params = {
            "owner": owner,
            "job_types": _optional_types(job_types),
            "limit": limit,
            "lease": float(lease),
            "now": now,
        }
        claimed = []
        for r in self._all("claim", params):
            attempt = int(r["attempt_count"])
            claimed.append(
                ClaimedJob(
                    id=int(r["id"]),
                    job_type=r["job_type"],
                    payload=r["payload"],
                    priority=int(r["priority"]),
                    attempt=attempt,
                    max_attempts=int(r["max_attempts"]),
                    idempotency_key=r["idempotency_key"],
                    trace_context=r["trace_context"] or {},
                    lease=Lease(int(r["id"]), r["lease_token"], owner, attempt),
                    lease_expires_at=r["lease_expires_at"],
                    created_at=r["created_at"],
                    last_error=r["last_error"],
                )
            )
        # SKIP LOCKED returns rows in lock order, not priority order; callers expect the latter.
        claimed.sort(key=lambda j: (j.priority, j.id))
        return claimed

    def heartbeat(
        self,
        lease: Lease,
        *,
        lease_seconds: float = 30.0,
        now: datetime | None = None,
        conn: AnyConnection | None = None,
    ) -> LeaseState:
        return self.heartbeat_many([lease], lease_seconds=lease_seconds, now=now, conn=conn)[lease.job_id]

    def heartbeat_many(
        self,
        leases: Sequence[Lease],
        *,
        lease_seconds: float = 30.0,
        now: datetime | None = None,
        conn: AnyConnection | None = None,
    ) -> dict[int, LeaseState]:
        """Renew many leases in one statement; says for each job whether it is still held."""
        _check_seconds(lease_seconds, "lease_seconds")
        if not leases:
            return {}
        params = {
            "ids": [lease.job_id for lease in leases],
            "tokens": [lease.token for lease in leases],
            "lease": float(lease_seconds),
            "now": now,
        }
        held = {int(r["id"]): bool(r["cancel_requested"]) for r in self._all("heartbeat", params, conn)}
        states = {}
        for lease in leases:
            if lease.job_id not in held:
                states[lease.job_id] = LeaseState.LOST
            elif held[lease.job_id]:
                states[lease.job_id] = LeaseState.CANCEL_REQUESTED
            else:
                states[lease.job_id] = LeaseState.HELD
        return states

    def succeed(
        self, lease: Lease, result: Any, *, conn: AnyConnection | None = None, now: datetime | None = None
    ) -> Completion:
        """Mark succeeded and write the result under the job's idempotency key, both fenced.

        With `conn` the caller can write its own business rows in the same transaction.
        """
        # Serialise here, so a bad result fails before any statement is sent.
        result_json = Jsonb(_result_json(result), dumps=_identity)
        row = self._one(
            "succeed",
            {"id": lease.job_id, "token": lease.token, "result": result_json, "now": now},
            conn,
        )
        assert row is not None
        if not row["fenced"]:
            return Completion.LEASE_LOST
        return Completion.CREATED if row["inserted"] else Completion.ALREADY_EXISTED

    def succeed_many(
        self,
        completions: Sequence[tuple[Lease, Any]],
        *,
        conn: AnyConnection | None = None,
        now: datetime | None = None,
    ) -> dict[int, Completion]:
        """`succeed` for many jobs in one statement (one commit): each is fenced by its own token
        and writes its result once per idempotency key, exactly as `succeed` would one by one."""
        if not completions:
            return {}
        ids = [lease.job_id for lease, _ in completions]
        if len(set(ids)) != len(ids):
            raise InvalidArgument("completions", "names a job more than once", "pass each lease once")
        results = [Jsonb(_result_json(result), dumps=_identity) for _, result in completions]
        rows = self._all(
            "succeed_many",
            {
                "ids": ids,
                "tokens": [lease.token for lease, _ in completions],
                "results": results,
                "now": now,
            },
            conn,
        )
        held = {int(r["id"]): bool(r["inserted"]) for r in rows}
        return {
            job_id: Completion.LEASE_LOST
            if job_id not in held
            else Completion.CREATED
            if held[job_id]
            else Completion.ALREADY_EXISTED
            for job_id in ids
        }

    def fail(
        self,
        lease: Lease,
        error: str,
        *,
        retryable: bool = True,
        delay: float | None = None,
        now: datetime | None = None,
    ) -> Failure:
        """Record a failed attempt: retry after a backoff while attempts remain, else dead.

        The database applies the retry only while attempts remain (pgwork.fail), whatever the
        caller asks; a non-retryable error goes dead at once."""
        retry_in = self.backoff.delay(lease.attempt) if delay is None else _check_seconds(delay, "delay")
        row = self._one(
            "fail",
            {
                "id": lease.job_id,
                "token": lease.token,
                "error": _error_text(error),
                "retry_delay": retry_in if retryable else None,
                "now": now,
            },
        )
        if row is None:
            return Failure(FailOutcome.LEASE_LOST)
        if row["status"] == "pending":
            return Failure(FailOutcome.RETRY, row["available_at"])
        return Failure(FailOutcome.DEAD)

    def release(self, lease: Lease, note: str = "released by its worker", *, now: datetime | None = None) -> bool:
        """Give a job back to pending (graceful shutdown). False if the lease was already lost
        or the job's cancellation was requested (acknowledge that instead)."""
        stamp = f"[{_error_text(note)} ({lease.owner}, attempt {lease.attempt})]"
        return self._one("release", {"id": lease.job_id, "token": lease.token, "note": stamp, "now": now}) is not None

    def acknowledge_cancel(self, lease: Lease, *, now: datetime | None = None) -> bool:
        """The holder stops a job whose cancellation was requested and marks it cancelled."""
        stamp = f"[cancelled while running on {lease.owner}, attempt {lease.attempt}]"
        return (
            self._one("acknowledge_cancel", {"id": lease.job_id, "token": lease.token, "note": stamp, "now": now})
            is not None
        )

    # -- maintenance ----------------------------------------------------------------------

    def reap(self, *, now: datetime | None = None, limit: int = 1000) -> list[Reclaimed]:
        """Return running jobs whose lease lapsed to pending (dead once attempts are used up)."""
        check_int(limit, "limit", 1, 1_000_000, "reap in batches of at most 1000000")
        return [
            Reclaimed(
                int(r["id"]),
                r["job_type"],
                r["previous_owner"],
                int(r["attempt_count"]),
                r["status"],
                float(r["overdue_seconds"]),
            )
            for r in self._all("reap", {"now": now, "limit": limit})
        ]

    def retry(self, ids: Sequence[int], *, max_attempts: int | None = None, now: datetime | None = None) -> list[int]:
        """Requeue dead or cancelled jobs now. Returns the ids requeued."""
        if max_attempts is not None:
            check_int(max_attempts, "max_attempts", 1, 32767, "use at least 1")
        rows = self._all("retry", {"ids": check_ids(ids), "max_attempts": max_attempts, "now": now})
        return sorted(int(r["id"]) for r in rows)

    def cancel(self, ids: Sequence[int], *, now: datetime | None = None) -> CancelReport:
        wanted = sorted(set(check_ids(ids)))
        rows = self._all("cancel", {"ids": wanted, "now": now})
        pending = {int(r["id"]) for r in rows if r["was"] == "pending"}
        running = {int(r["id"]) for r in rows if r["was"] == "running"}
        rest = [i for i in wanted if i not in pending and i not in running]
        return CancelReport(sorted(pending), sorted(running), rest)

    def prune(
        self,
        older_than: timedelta,
        *,
        statuses: Sequence[str] = ("succeeded", "cancelled"),
        now: datetime | None = None,
        batch: int = 10_000,
    ) -> int:
        """Delete finished jobs completed before now - older_than, batch by batch."""
        seconds = check_age(older_than)
        if seconds < 0:
            raise InvalidArgument("older_than", "is negative", "give an age such as 30d")
        allowed = {"succeeded", "cancelled", "dead"}
        if not statuses or not set(statuses) <= allowed:
            raise InvalidArgument("statuses", f"must be among {sorted(allowed)}", "only history is pruned")
        check_int(batch, "batch", 1, 1_000_000, "prune in batches of at most 1000000")
        total = 0
        while True:
            row = self._one("prune", {"statuses": list(statuses), "older_than": seconds, "now": now, "batch": batch})
            deleted = int(row["deleted"]) if row else 0
            total += deleted
            if deleted < batch:
                return total

    # -- questions ------------------------------------------------------------------------

    def stats(self, job_types: Iterable[str] | None = None, *, now: datetime | None = None) -> list[TypeStats]:
        rows = self._all("stats", {"job_types": _optional_types(job_types), "now": now})
        return [
            TypeStats(
                r["job_type"],
                int(r["ready"]),
                int(r["scheduled"]),
                int(r["retrying"]),
                int(r["running"]),
                int(r["dead"]),
                float(r["oldest_wait_seconds"]),
                float(r["max_heartbeat_age_seconds"]),
            )
            for r in rows
        ]

    def running(self, *, now: datetime | None = None) -> list[Row]:
        return self._all("running", {"now": now})

    def retrying(self, *, now: datetime | None = None) -> list[Row]:
        return self._all("retrying", {"now": now})

    def dead(self, *, limit: int = 100) -> list[Row]:
        check_int(limit, "limit", 1, 1_000_000, "show at most 1000000 dead jobs at once")
        return self._all("dead", {"limit": limit})

    def running_by_owner(self, job_types: Iterable[str] | None = None) -> dict[str, int]:
        rows = self._all("running_by_owner", {"job_types": _optional_types(job_types)})
        return {r["owner"]: int(r["jobs"]) for r in rows}

    def job(self, job_id: int) -> Row | None:
        return self._one("get_job", {"id": check_id(job_id)})

    def result(self, key: str) -> Row | None:
        return self._one("get_result", {"key": check_text(key, "key", "pass the job's idempotency key")})

    # -- wake-ups -------------------------------------------------------------------------

    def listener(self) -> Listener:
        """A dedicated session connection that LISTENs for new jobs (never from the pool:
        behind a transaction-mode pooler LISTEN would silently stop working)."""
        return Listener(self.dsn, self.application_name)


class Listener:
    """LISTEN on its own connection; `wait` returns the job types announced."""

    def __init__(self, dsn: str, application_name: str = "pgwork") -> None:
        self._conn = connect(dsn, application_name=f"{application_name}-listen")
        self._conn.execute(sql_files.query("listen"))

    def wait(self, timeout: float) -> set[str]:
        """Block up to `timeout` seconds for the first notification, then drain what else came."""
        types: set[str] = set()
        deadline = time.monotonic() + timeout
        for notify in self._conn.notifies(timeout=max(timeout, 0.0), stop_after=1):
            types.add(notify.payload)
        remaining = deadline - time.monotonic()
        if types and remaining > 0:
            for notify in self._conn.notifies(timeout=0.001):
                types.add(notify.payload)
        return types

    def close(self) -> None:
        self._conn.close()

    @property
    def closed(self) -> bool:
        return bool(self._conn.closed)


def _first_error_line(exc: BaseException) -> str:
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


def _result_json(result: Any) -> str:
    """A handler's result as JSON text, or InvalidArgument naming `result`."""
    return result_json(result)


def _check_seconds(value: float, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0 or value == float("inf"):
        raise InvalidArgument(field, f"must be a finite number of seconds >= 0, got {value!r}", "e.g. 30")
    return float(value)


def _identity(text: Any) -> str:
    return str(text)


def new_token() -> uuid.UUID:
    """A lease token as the database would mint it; for tests that forge stale leases."""
    return uuid.uuid4()
