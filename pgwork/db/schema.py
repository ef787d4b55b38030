"""The schema: its version, migrating to the newest, granting a role a profile, and reading the
claim statement back from the installed function."""

from __future__ import annotations

import contextlib
import logging
import re
import time
from collections.abc import Iterator, Sequence
from typing import LiteralString

import psycopg

from pgwork import sql_files
from pgwork.db import statements
from pgwork.db.connect import AnyConnection, check_encoding, connect, first_error_line
from pgwork.db.rows import LockHolder, RoleFacts
from pgwork.errors import InvalidArgument, MigrationLocked, NotMigrated, SchemaTooNew

log = logging.getLogger("pgwork.db")


def schema_version(conn: AnyConnection) -> int:
    if not statements.scalar(conn, "schema_exists"):
        return 0
    return int(statements.scalar(conn, "schema_version") or 0)


def check_schema(conn: AnyConnection) -> None:
    check_version(schema_version(conn), conn.info.dbname)


def check_version(version: int, dbname: str) -> None:
    """NotMigrated or SchemaTooNew unless `version` is the one this pgwork knows (pure)."""
    latest = sql_files.latest_version()
    if version == 0:
        raise NotMigrated(f"database {dbname!r} has no pgwork schema; run `pgwork migrate` first")
    if version > latest:
        raise SchemaTooNew(
            f"database {dbname!r} is at pgwork schema version {version}, but this pgwork "
            f"knows only up to {latest}; upgrade pgwork (never run an older pgwork against it)"
        )
    if version < latest:
        raise NotMigrated(
            f"database {dbname!r} is at pgwork schema version {version} of {latest}; run `pgwork migrate`"
        )


# How long a migrator waits for another to finish before giving up, and how often it looks.
LOCK_WAIT_SECONDS = 600.0
LOCK_POLL_SECONDS = 0.2


def migrate(dsn: str, *, lock_wait: float = LOCK_WAIT_SECONDS) -> list[int]:
    """Apply the migrations the database lacks, under an advisory lock.

    Ten pods starting at once migrate once: the first takes the lock and applies; the others
    wait for the lock (at most `lock_wait` seconds), then find nothing left to do. Returns the
    versions this call applied. Consecutive ordinary migrations apply in one transaction; a
    no-transaction migration (sql_files.NO_TRANSACTION) runs statement by statement between
    them and is recorded once all its statements succeeded. A schema already current is a no-op
    needing no DDL rights (a worker pod's migrate init container, run under the worker role,
    succeeds); a schema behind with a role that cannot change it is one line naming the fix.
    """
    latest = sql_files.latest_version()
    with connect(dsn, autocommit=True, application_name="pgwork-migrate") as conn:
        check_encoding(conn)
        try:
            current = schema_version(conn)
        except psycopg.errors.InsufficientPrivilege:
            current = -1  # unknown: the lock and the DDL below say whether this role may migrate
        if current > latest:
            raise _too_new(conn, current, latest)
        if current == latest:
            return []
        try:
            with _migration_lock(dsn, lock_wait):
                return _apply(conn, latest)
        except psycopg.errors.InsufficientPrivilege as exc:
            where = f"at pgwork schema version {current} of {latest}" if current >= 0 else "not readable"
            raise NotMigrated(
                f"database {conn.info.dbname!r} is {where} and role {conn.info.user!r} cannot change the schema "
                f"({first_error_line(exc)}); run `pgwork migrate` as the role that owns schema pgwork"
            ) from None


def batches(pending: Sequence[sql_files.Migration]) -> list[list[sql_files.Migration]]:
    """`pending` in order, cut into what runs together (pure): runs of ordinary migrations share
    one transaction; each no-transaction migration stands alone."""
    out: list[list[sql_files.Migration]] = []
    for migration in pending:
        if out and migration.transactional and out[-1][-1].transactional:
            out[-1].append(migration)
        else:
            out.append([migration])
    return out


@contextlib.contextmanager
def _migration_lock(dsn: str, lock_wait: float) -> Iterator[None]:
    """Hold the migration lock while the block runs, in a transaction of a connection of its own
    (see migrate_try_lock), polling for it at most `lock_wait` seconds."""
    with connect(dsn, autocommit=False, application_name="pgwork-migrate") as holder:
        deadline = time.monotonic() + lock_wait
        while not statements.scalar(holder, "migrate_try_lock"):
            holder.rollback()  # no transaction, no snapshot while waiting
            if time.monotonic() >= deadline:
                raise _locked(holder, lock_wait)
            time.sleep(LOCK_POLL_SECONDS)
        try:
            yield
        finally:
            # Ending the transaction releases the lock; so does closing the connection, so a
            # failure here must not hide the block's own error.
            with contextlib.suppress(psycopg.Error):
                holder.rollback()


def _locked(conn: AnyConnection, lock_wait: float) -> MigrationLocked:
    holder = statements.one(conn, "migrate_lock_holder", None, LockHolder)
    conn.rollback()
    who = (
        f"pid {holder.pid} ({holder.application_name or 'no application name'}) has held the pgwork migration "
        f"lock for {holder.held_s} s"
        if holder
        else "another session holds the pgwork migration lock"
    )
    return MigrationLocked(
        f"database {conn.info.dbname!r}: {who}; this migrate waited {lock_wait:g} s. An index build on a big "
        "table can take longer: let it finish and run `pgwork migrate` again, or wait longer with --lock-wait"
    )


def _apply(conn: AnyConnection, latest: int) -> list[int]:
    with conn.transaction():
        statements.execute(conn, "migrate_bootstrap")
        current = schema_version(conn)
    if current > latest:
        raise _too_new(conn, current, latest)
    applied: list[int] = []
    for batch in batches([m for m in sql_files.migrations() if m.version > current]):
        if batch[0].transactional:
            with conn.transaction():
                for migration in batch:
                    conn.execute(migration.sql)
                    _record(conn, migration)
        else:
            [migration] = batch
            for step in migration.steps:
                _run_step(conn, step)
            with conn.transaction():
                _record(conn, migration)
        for migration in batch:
            applied.append(migration.version)
            log.info("applied migration %04d_%s", migration.version, migration.name)
    return applied


def _record(conn: AnyConnection, migration: sql_files.Migration) -> None:
    statements.execute(conn, "migrate_record", {"version": migration.version, "name": migration.name})


def _run_step(conn: AnyConnection, step: sql_files.Step) -> None:
    """One statement of a no-transaction migration, in autocommit. An interrupted CREATE INDEX
    CONCURRENTLY leaves an invalid index of that name, which IF NOT EXISTS would keep: it is
    dropped first and built again."""
    if (
        step.kind == "create"
        and statements.scalar(conn, "index_valid", {"schema": step.schema, "index": step.index}) is False
    ):
        log.warning(
            "index %s.%s is invalid (an interrupted build); dropping it to build it again", step.schema, step.index
        )
        conn.execute(
            psycopg.sql.SQL("DROP INDEX CONCURRENTLY IF EXISTS {}").format(
                psycopg.sql.Identifier(step.schema, step.index)
            )
        )
    conn.execute(step.sql)


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
        facts = statements.one(conn, "role_facts", {"role": role}, RoleFacts)
        if facts is None:
            raise InvalidArgument(
                "role",
                f"there is no role {role!r} on this server",
                "create it first: CREATE ROLE name LOGIN PASSWORD ...",
            )
        if facts.rolsuper or facts.has_owner_rights:
            what = "is a superuser" if facts.rolsuper else "owns schema pgwork or is a member of its owner"
            raise InvalidArgument(
                "role",
                f"{role!r} {what}, so no profile can narrow it",
                "grant to a role of its own, made with CREATE ROLE",
            )
        with conn.transaction():
            applied = statements.scalar(conn, "grant_profiles", {"role": role, "profiles": [profile]})
    return list(applied)


# With no limit applying (migration 11) the claim runs one of two statements (migration 28): the
# types asked for, its last (the limited branch and the any-type one before it end in their own
# RETURN, so the greedy prefix skips them), or any type, the one under `IF job_types IS NULL`.
_CLAIM_BODY = re.compile(r".*RETURN QUERY\s+(?P<statement>.*?);\s*END\s*$", re.DOTALL)
_CLAIM_ANY_TYPE = re.compile(
    r"IF job_types IS NULL THEN\s+RETURN QUERY\s+(?P<statement>.*?);\s*RETURN;\s*END IF;", re.DOTALL
)
_CLAIM_ARGUMENTS = {
    "owner": "%(owner)s::text",
    "job_types": "%(job_types)s::text[]",
    "max_jobs": "%(limit)s::integer",
    "lease_seconds": "%(lease)s::float8",
    "now_": "coalesce(%(now)s::timestamptz, now())",
}
_CLAIM_NAMES = re.compile(r"(?<![\w.])(" + "|".join(_CLAIM_ARGUMENTS) + r")(?!\w)")


def claim_statement(conn: AnyConnection, *, any_type: bool = False) -> LiteralString:
    """The statement the installed pgwork.claim runs when no limit applies to the types asked for,
    read back from the database, with its arguments as %(owner)s, %(job_types)s, %(limit)s,
    %(lease)s and %(now)s: what the plan tests and the lab EXPLAIN (EXPLAIN of the function call
    cannot see inside it). `any_type`: the statement for a claim of any type (job_types NULL),
    which takes no %(job_types)s; else the one for the types asked for, as every worker claims."""
    source = str(statements.scalar(conn, "claim_source"))
    match = (_CLAIM_ANY_TYPE if any_type else _CLAIM_BODY).search(source)
    if match is None:
        shape = (
            "IF job_types IS NULL THEN RETURN QUERY <statement>; RETURN; END IF;"
            if any_type
            else "RETURN QUERY <statement>; END"
        )
        raise ValueError(f"pgwork.claim no longer has `{shape}`")
    body = re.sub(r"--[^\n]*", "", match.group("statement"))
    # The text is the body of pgwork's own migration, as installed; never input.
    return _CLAIM_NAMES.sub(lambda m: _CLAIM_ARGUMENTS[m.group(1)], body)
