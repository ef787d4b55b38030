"""Least privilege: a worker role can run the job's life and nothing more."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import psycopg
import pytest
from psycopg import sql

from pgwork.errors import InvalidArgument
from pgwork.models import Completion, FailOutcome, LeaseState
from pgwork.queue import Queue, grant


@pytest.fixture
def role(dsn: str) -> Iterator[str]:
    name = f"pgwork_role_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(name)))
    yield name
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(name)))
        conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(name)))


def _as(dsn: str, role: str) -> str:
    return psycopg.conninfo.make_conninfo(dsn, user=role)


def test_worker_profile_runs_the_life_and_cannot_delete(dsn: str, role: str) -> None:
    assert grant(dsn, role, "worker") == ["reader", "worker"]
    with Queue(_as(dsn, role)) as q:
        q.enqueue("ocr", {"doc": 1}, key="d1")
        q.enqueue("ocr", {"doc": 2}, max_attempts=1)
        a, b = q.claim("w", limit=2, lease=5)
        assert q.heartbeat(a.lease) is LeaseState.HELD
        assert q.succeed(a.lease, {"ok": True}) is Completion.CREATED
        assert q.fail(b.lease, "boom").outcome is FailOutcome.DEAD
        q.enqueue("ocr", {"doc": 3})
        q.claim("w", lease=1)
        assert len(q.reap(now=datetime.now(UTC) + timedelta(seconds=10))) == 1
        assert q.stats() and q.dead()
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            q.prune(timedelta(0))
    with psycopg.connect(_as(dsn, role)) as conn, pytest.raises(psycopg.errors.InsufficientPrivilege):
        conn.execute("DROP TABLE pgwork.job_results")


def test_reader_profile_reads_only(dsn: str, role: str) -> None:
    grant(dsn, role, "reader")
    with Queue(_as(dsn, role)) as q:
        assert q.stats() == []
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            q.enqueue("ocr", {"doc": 1})


def test_maintainer_profile_can_prune(dsn: str, role: str) -> None:
    grant(dsn, role, "maintainer")
    with Queue(_as(dsn, role)) as q:
        assert q.prune(timedelta(days=1)) == 0


def test_grant_refuses_unknown_profile(dsn: str) -> None:
    with pytest.raises(InvalidArgument, match="profile"):
        grant(dsn, "someone", "admin")
