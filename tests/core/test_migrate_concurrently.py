"""No-transaction migrations on a real server: migration 24 under live writers, two migrators
racing while one builds an index CONCURRENTLY, a migrator that gives up waiting, and an index
build interrupted half way repaired by the next run."""

from __future__ import annotations

import threading
from typing import Any

import psycopg
import pytest

from pgwork import sql_files
from pgwork.db import migrate
from pgwork.errors import MigrationLocked
from tests.support.live_load import assert_every_job_once, migrate_under_load
from tests.support.versions import at_version
from tests.support.waiting import wait_for

DROPS = sql_files.migrations()[23]  # 0024


def _with_extra(monkeypatch: pytest.MonkeyPatch, text: str) -> int:
    """A migration after the shipped ones, for this test only; returns its version."""
    shipped = sql_files.migrations()
    extra = sql_files.parse_migration(len(shipped) + 1, "test_extra", text)
    monkeypatch.setattr(sql_files, "migrations", lambda: (*shipped, extra))
    return extra.version


def _from(version: int) -> list[int]:
    """The versions a migrate from just below `version` applies: it and every later one shipped."""
    return list(range(version, sql_files.latest_version() + 1))


def _versions(dsn: str) -> list[int]:
    with psycopg.connect(dsn) as conn:
        return [r[0] for r in conn.execute("SELECT version FROM pgwork.schema_version ORDER BY version")]


def _valid(dsn: str, index: str) -> bool | None:
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            "SELECT i.indisvalid FROM pg_index AS i WHERE i.indexrelid = to_regclass(%s)", [f"pgwork.{index}"]
        ).fetchone()
    return None if row is None else bool(row[0])


def test_24_drops_the_old_claim_indexes_under_live_writers_and_loses_and_doubles_no_job(empty_dsn: str) -> None:
    applied, took, load = migrate_under_load(empty_dsn, DROPS.version - 1)
    assert applied == _from(DROPS.version)
    print(f"\nmigration 24 under load: {took * 1000:.0f} ms; {sum(map(len, load.produced))} produced")
    assert_every_job_once(empty_dsn, load)
    assert _valid(empty_dsn, "jobs_claim_idx") is None and _valid(empty_dsn, "jobs_claim_type_idx") is None
    assert migrate(empty_dsn) == []  # and again: nothing left to do


def _migrate_into(dsn: str, out: dict[str, Any]) -> None:
    try:
        out["applied"] = migrate(dsn, lock_wait=120)
    except BaseException as exc:
        out["error"] = exc


def _sessions(dsn: str, where: str) -> int:
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
            " AND application_name = 'pgwork-migrate' AND " + where
        ).fetchone()
    assert row is not None
    return int(row[0])


def test_two_migrators_racing_while_one_builds_an_index_concurrently_both_finish_and_record_once(
    dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    version = _with_extra(
        monkeypatch,
        sql_files.NO_TRANSACTION
        + "\nCREATE INDEX CONCURRENTLY IF NOT EXISTS jobs_race_idx ON pgwork.jobs (job_type);\n",
    )
    first: dict[str, Any] = {}
    second: dict[str, Any] = {}
    # A reader's open snapshot keeps the first migrator's build waiting (CONCURRENTLY waits for
    # older snapshots), so the second arrives while the build is under way.
    with psycopg.connect(dsn) as reader:
        reader.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        reader.execute("SELECT count(*) FROM pgwork.jobs")
        a = threading.Thread(target=_migrate_into, args=(dsn, first))
        a.start()
        wait_for(lambda: _sessions(dsn, "query LIKE 'CREATE INDEX CONCURRENTLY%'") == 1, what="the build waiting")
        b = threading.Thread(target=_migrate_into, args=(dsn, second))
        b.start()
        # Each migrator: one connection that applies, one that holds (or waits for) the lock.
        wait_for(lambda: _sessions(dsn, "true") == 4, what="the second waiting")
        reader.rollback()
    # The second, had it blocked holding a snapshot, would have deadlocked the build: both end.
    for t in (a, b):
        t.join(90)
        assert not t.is_alive(), "a migrator is stuck"
    assert "error" not in first and "error" not in second, (first, second)
    assert sorted([first["applied"], second["applied"]]) == [[], [version]]
    assert _versions(dsn).count(version) == 1
    assert _valid(dsn, "jobs_race_idx") is True


def test_a_migrator_that_waits_too_long_for_the_lock_says_who_holds_it(empty_dsn: str) -> None:
    at_version(empty_dsn, DROPS.version - 1)
    with psycopg.connect(empty_dsn, application_name="other-migrate") as holder:
        pid = holder.info.backend_pid
        holder.execute("SELECT pg_advisory_xact_lock(hashtext('pgwork.migrate'))")  # as pgwork < 24 took it
        with pytest.raises(
            MigrationLocked, match=rf"pid {pid} \(other-migrate\) has held the pgwork migration lock for \d+ s"
        ):
            migrate(empty_dsn, lock_wait=0.3)
    assert _versions(empty_dsn)[-1] == DROPS.version - 1
    assert migrate(empty_dsn, lock_wait=0.3) == _from(DROPS.version)  # the lock went with its transaction


def test_a_build_interrupted_half_way_is_not_recorded_and_the_next_run_rebuilds_the_invalid_index(
    dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    version = _with_extra(
        monkeypatch,
        sql_files.NO_TRANSACTION
        + "\n-- the first builds; the second fails half way on duplicate keys, leaving an invalid index\n"
        "CREATE INDEX CONCURRENTLY IF NOT EXISTS jobs_first_idx ON pgwork.jobs (job_type);\n"
        "CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS jobs_once_idx\n    ON pgwork.jobs (job_type);\n",
    )
    with psycopg.connect(dsn) as conn:
        conn.execute("INSERT INTO pgwork.jobs (job_type, idempotency_key) VALUES ('twice', 'a'), ('twice', 'b')")
    with pytest.raises(psycopg.errors.UniqueViolation):
        migrate(dsn)
    assert version not in _versions(dsn)
    assert (_valid(dsn, "jobs_first_idx"), _valid(dsn, "jobs_once_idx")) == (True, False)
    with psycopg.connect(dsn) as conn:
        conn.execute("DELETE FROM pgwork.jobs WHERE id = (SELECT max(id) FROM pgwork.jobs)")
    assert migrate(dsn) == [version]
    assert _versions(dsn).count(version) == 1
    assert (_valid(dsn, "jobs_first_idx"), _valid(dsn, "jobs_once_idx")) == (True, True)
    with psycopg.connect(dsn) as conn, pytest.raises(psycopg.errors.UniqueViolation):
        conn.execute(
            "INSERT INTO pgwork.jobs (job_type, idempotency_key) VALUES ('twice', 'c')"
        )  # the rebuilt index is the unique one
