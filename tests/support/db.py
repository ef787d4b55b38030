"""Databases for tests: throwaway databases on the test server (the fixtures in tests/conftest.py),
roles, and databases holding what version 1 of the schema left behind (for migration tests)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
from psycopg import sql

from pgwork.db import grant
from pgwork.dsn import with_dbname
from tests.support.versions import at_version

# The `make_role` fixture (tests/core/conftest.py, tests/ui/conftest.py): make_role(profile=None, *, name=None)
# -> DSN as that role.
MakeRole = Callable[..., str]


def role_maker(dsn: str) -> Iterator[MakeRole]:
    """The body of the `make_role` fixtures: create a LOGIN role with a unique name (optionally
    granted a profile) and return its DSN; every role made is dropped afterwards."""
    made: list[str] = []

    def make(profile: str | None = None, *, name: str | None = None) -> str:
        role = name or f"pgwork_t_{uuid.uuid4().hex[:10]}"
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
        made.append(role)
        if profile is not None:
            grant(dsn, role, profile)
        return psycopg.conninfo.make_conninfo(dsn, user=role)

    yield make
    with psycopg.connect(dsn, autocommit=True) as conn:
        for role in made:
            conn.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(role)))
            conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


class Databases:
    """Creates and drops throwaway databases on the test server."""

    def __init__(self, admin: str) -> None:
        self.admin = admin
        self.created: list[str] = []

    def _execute(self, statement: sql.Composable) -> None:
        with psycopg.connect(self.admin, autocommit=True) as conn:
            conn.execute(statement)

    def create(self, *, template: str = "template0", encoding: str = "UTF8") -> str:
        name = f"pgwork_t_{uuid.uuid4().hex[:12]}"
        self._execute(
            sql.SQL("CREATE DATABASE {} TEMPLATE {} ENCODING {} LC_COLLATE 'C' LC_CTYPE 'C'").format(
                sql.Identifier(name), sql.Identifier(template), sql.Literal(encoding)
            )
        )
        self.created.append(name)
        return with_dbname(self.admin, name)

    def drop(self, dsn: str) -> None:
        """Drop one database this made (a test's, at its teardown: thousands left for the session's
        end made that one teardown outlast the test timeout on a loaded machine)."""
        name = psycopg.conninfo.conninfo_to_dict(dsn)["dbname"]
        if name in self.created:
            self._execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(str(name))))
            self.created.remove(str(name))

    def drop_all(self) -> None:
        for name in self.created:
            self._execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
        self.created.clear()


def at_version_1(dsn: str) -> None:
    at_version(dsn, 1)


def drop_roles(dsn: str, roles: list[str]) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        for role in roles:
            conn.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(role)))
            conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


# One job in every state version 1 could leave behind, written as version 1's SQL did.
V1_JOBS = """
INSERT INTO pgwork.jobs (job_type, payload, status, attempt_count, max_attempts, available_at, started_at,
                         completed_at, lease_owner, lease_token, lease_expires_at, heartbeat_at,
                         cancel_requested_at, last_error, idempotency_key)
VALUES ('t', '{"s": "ready"}', 'pending', 0, 5, now() - interval '1 min', NULL, NULL, NULL, NULL, NULL, NULL,
        NULL, NULL, 'ready'),
       ('t', '{"s": "scheduled"}', 'pending', 0, 5, now() + interval '1 day', NULL, NULL, NULL, NULL, NULL, NULL,
        NULL, NULL, 'scheduled'),
       ('t', '{"s": "retrying"}', 'pending', 2, 5, now() - interval '1 s', NULL, NULL, NULL, NULL, NULL, NULL,
        NULL, 'boom', 'retrying'),
       ('t', '{"s": "running"}', 'running', 1, 5, now(), now(), NULL, 'old-pod',
        '11111111-1111-1111-1111-111111111111', now() + interval '1 hour', now(), NULL, NULL, 'running'),
       ('t', '{"s": "stopping"}', 'running', 1, 5, now(), now(), NULL, 'old-pod',
        '22222222-2222-2222-2222-222222222222', now() + interval '1 hour', now(), now(), NULL, 'stopping'),
       ('t', '{"s": "lapsed"}', 'running', 1, 5, now(), now(), NULL, 'gone-pod',
        '33333333-3333-3333-3333-333333333333', now() - interval '1 min', now(), NULL, NULL, 'lapsed'),
       ('t', '{"s": "succeeded"}', 'succeeded', 1, 5, now(), now(), now(), 'old-pod', NULL, NULL, now(), NULL, NULL,
        'succeeded'),
       ('t', '{"s": "dead"}', 'dead', 5, 5, now(), now(), now(), 'old-pod', NULL, NULL, now(), NULL, 'gave up',
        'dead'),
       ('t', '{"s": "cancelled"}', 'cancelled', 0, 5, now(), NULL, now(), NULL, NULL, NULL, NULL, NULL, NULL,
        'cancelled');
INSERT INTO pgwork.job_results (idempotency_key, job_id, job_type, produced_by, result)
SELECT idempotency_key, id, job_type, 'old-pod', '{"ok": true}' FROM pgwork.jobs WHERE status = 'succeeded';
"""


# Version 1's columns of pgwork.jobs: a later migration's new column (0010's timeout_seconds) is
# NULL on every row it finds, which its own tests check; a snapshot compares what was there.
V1_COLUMNS = (
    "id, job_type, payload, status, priority, attempt_count, max_attempts, created_at, available_at, started_at, "
    "completed_at, lease_owner, lease_token, lease_expires_at, heartbeat_at, cancel_requested_at, last_error, "
    "idempotency_key, trace_context"
)


def snapshot(dsn: str) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """Every row's every value that is not NULL: a migration that adds a column (NULL in the rows
    it finds) leaves the snapshot equal, one that changes or clears a value does not."""
    with psycopg.connect(dsn) as conn:
        jobs = conn.execute(f"SELECT {V1_COLUMNS} FROM pgwork.jobs ORDER BY id").fetchall()
        results = conn.execute("SELECT * FROM pgwork.job_results ORDER BY idempotency_key").fetchall()
    return jobs, results


def by_key(dsn: str) -> dict[str, int]:
    with psycopg.connect(dsn) as conn:
        return {k: i for k, i in conn.execute("SELECT idempotency_key, id FROM pgwork.jobs").fetchall()}
