"""Databases left at an older schema version, as an older pgwork left them."""

from __future__ import annotations

import psycopg

from pgwork import sql_files


def at_version(dsn: str, version: int) -> None:
    """Apply migrations 1..`version` by hand to an empty database, recording each (a
    no-transaction migration's statements one by one, as `migrate` runs them)."""
    migrations = sql_files.migrations()[:version]
    assert [m.version for m in migrations] == list(range(1, version + 1))
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql_files.query("migrate_bootstrap"))
        for migration in migrations:
            if migration.transactional:
                with conn.transaction():
                    conn.execute(migration.sql)
            for step in migration.steps:
                conn.execute(step.sql)
            conn.execute(sql_files.query("migrate_record"), {"version": migration.version, "name": migration.name})
