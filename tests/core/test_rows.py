"""The row factories (tests/support/rows.py) leave each state they name, as pgwork itself would."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import psycopg
import pytest

from pgwork.db import Queue, statements
from pgwork.db.rows import ClaimRow
from tests.support.rows import Rows


def test_each_factory_leaves_the_state_it_names(queue: Queue) -> None:
    rows = Rows(queue)
    at = datetime.now(UTC) - timedelta(days=3)
    # A ready job of another type, so the factories below claim only their own.
    pending = queue.job(Rows(queue, "ready").pending())
    scheduled = queue.job(rows.scheduled(delay=600))
    running = rows.running(owner="w1", lease=300)
    retrying = queue.job(rows.retrying(error="timeout", delay=90))
    succeeded = queue.job(rows.succeeded(result={"ok": 1}, now=at))
    dead = queue.job(rows.dead(error="no such file"))
    cancelled = queue.job(rows.cancelled())
    stopping = rows.cancel_requested()
    held = queue.job(running.id)
    assert pending and pending.status == "pending" and pending.available_at <= datetime.now(UTC)
    assert scheduled and scheduled.status == "pending" and scheduled.available_at > datetime.now(UTC)
    assert held and (held.status, held.lease_owner, held.lease_token) == ("running", "w1", running.lease.token)
    assert retrying and (retrying.status, retrying.attempt_count, retrying.last_error) == ("pending", 1, "timeout")
    assert retrying.available_at > datetime.now(UTC) + timedelta(seconds=60)
    assert succeeded and (succeeded.status, succeeded.completed_at) == ("succeeded", at)
    result = queue.result(succeeded.idempotency_key)
    assert result and result.result == {"ok": 1}
    assert dead and (dead.status, dead.last_error) == ("dead", "no such file")
    assert cancelled and cancelled.status == "cancelled"
    stopped = queue.job(stopping.id)
    assert stopped and stopped.status == "running" and stopped.cancel_requested_at is not None
    rows.ready_now(retrying.id)
    assert [j.id for j in queue.claim("w2", job_types=["ready", "factory"], limit=10)] == [pending.id, retrying.id]


def test_claim_rows_decode_in_binary_as_the_job_is_stored(queue: Queue) -> None:
    """The claim's binary, positional decode (issue 28) gives what the row holds, to the microsecond."""
    Rows(queue).pending()
    [claimed] = queue.claim("w1", job_types=["factory"], limit=1)
    stored = queue.job(claimed.id)
    assert stored is not None
    assert (claimed.lease.token, claimed.lease_expires_at, claimed.created_at) == (
        stored.lease_token,
        stored.lease_expires_at,
        stored.created_at,
    )
    assert claimed.lease_expires_at.tzinfo is not None and claimed.attempt == stored.attempt_count == 1


def test_rows_by_position_only_once_the_column_names_match(queue: Queue) -> None:
    """A statement whose columns differ from a NamedTuple's fields fails loudly, never misplaces."""
    with (
        psycopg.connect(queue.dsn) as conn,
        conn.cursor(row_factory=statements.row_factory(ClaimRow)) as cur,
        pytest.raises(ValueError, match="ClaimRow expects columns"),
    ):
        cur.execute("SELECT 1 AS job_type, 2 AS id")
