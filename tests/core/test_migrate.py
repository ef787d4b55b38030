"""Migrations: idempotent, safe under concurrency, refusing what pgwork cannot use."""

from __future__ import annotations

import multiprocessing

import psycopg
import pytest
from conftest import Databases

from pgwork.errors import EncodingRefused, NotMigrated, SchemaTooNew
from pgwork.queue import Queue, migrate
from pgwork.sql_files import latest_version


def test_migrate_is_idempotent(empty_dsn: str) -> None:
    assert migrate(empty_dsn) == list(range(1, latest_version() + 1))
    assert migrate(empty_dsn) == []
    with psycopg.connect(empty_dsn) as conn:
        rows = conn.execute("SELECT version FROM pgwork.schema_version ORDER BY version").fetchall()
    assert [r[0] for r in rows] == list(range(1, latest_version() + 1))


def _migrate_in_child(dsn: str, out: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    try:
        out.put(migrate(dsn))
    except Exception as exc:  # report, don't hang the parent
        out.put(repr(exc))


def test_eight_processes_migrate_once(empty_dsn: str) -> None:
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=_migrate_in_child, args=(empty_dsn, out)) for _ in range(8)]
    for p in procs:
        p.start()
    results = [out.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(timeout=30)
    applied = [r for r in results if r]
    assert applied == [list(range(1, latest_version() + 1))], results  # exactly one applied; no errors
    assert sorted(results, key=len)[:7] == [[]] * 7


def test_sql_ascii_database_is_refused(databases: Databases) -> None:
    dsn = databases.create(encoding="SQL_ASCII")
    with pytest.raises(EncodingRefused) as info:
        migrate(dsn)
    message = str(info.value)
    assert "SQL_ASCII" in message and "UTF8" in message and "TEMPLATE template0" in message
    with psycopg.connect(dsn) as conn:  # nothing was created
        assert conn.execute("SELECT to_regnamespace('pgwork')").fetchone() == (None,)


def test_unmigrated_database_is_refused(empty_dsn: str) -> None:
    with pytest.raises(NotMigrated, match="pgwork migrate"):
        Queue(empty_dsn)


def test_newer_schema_is_refused(dsn: str) -> None:
    with psycopg.connect(dsn) as conn:
        conn.execute(
            "INSERT INTO pgwork.schema_version (version, name) VALUES (%s, 'from_the_future')", (latest_version() + 1,)
        )
    with pytest.raises(SchemaTooNew, match="upgrade pgwork"):
        Queue(dsn)
    with pytest.raises(SchemaTooNew):
        migrate(dsn)


def test_running_row_without_lease_is_impossible(dsn: str) -> None:
    with psycopg.connect(dsn) as conn, pytest.raises(psycopg.errors.CheckViolation):
        conn.execute("INSERT INTO pgwork.jobs (job_type, status, idempotency_key) VALUES ('x', 'running', 'k')")
