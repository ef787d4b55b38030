"""Fixtures the core tests share: roles granted a profile, dropped after the test."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import psycopg
import pytest
from psycopg import sql

from pgwork.db import grant
from tests.support.db import MakeRole


def _as(dsn: str, role: str) -> str:
    return psycopg.conninfo.make_conninfo(dsn, user=role)


@pytest.fixture
def make_role(dsn: str) -> Iterator[MakeRole]:
    """Create a LOGIN role with a unique name (optionally granted a profile); returns its DSN.
    Every role made is dropped after the test."""
    made: list[str] = []

    def make(profile: str | None = None, *, name: str | None = None) -> str:
        role = name or f"pgwork_t_{uuid.uuid4().hex[:10]}"
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
        made.append(role)
        if profile is not None:
            grant(dsn, role, profile)
        return _as(dsn, role)

    yield make
    with psycopg.connect(dsn, autocommit=True) as conn:
        for role in made:
            conn.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(role)))
            conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))
