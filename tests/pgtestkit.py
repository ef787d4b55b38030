"""Throwaway databases on the test server (shared by the fixtures in conftest.py)."""

from __future__ import annotations

import uuid

import psycopg
from psycopg import sql

from pgwork.dsn import with_dbname


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

    def drop_all(self) -> None:
        for name in self.created:
            self._execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
        self.created.clear()
