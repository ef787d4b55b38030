"""The backlog reading (pgwork.backlog behind Queue.stats): counts capped per type and status, ages
from the head of an index, every type asked for answered, a cost that follows the number of
types and not the number of jobs, and no failure on timestamps PostgreSQL cannot subtract."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

from pgwork.db import Queue
from pgwork.models import TypeStats
from tests.support.rows import Rows


def _by_type(stats: list[TypeStats]) -> dict[str, TypeStats]:
    return {s.job_type: s for s in stats}


def test_each_count_stops_at_the_cap_and_says_so(queue: Queue) -> None:
    t0 = datetime.now(UTC)
    rows = Rows(queue, "a")
    for _ in range(3):  # claimed ones first: Rows.running claims the type's first ready job
        rows.running(now=t0)
        rows.dead(now=t0)
        rows.retrying(now=t0)
    for _ in range(3):
        rows.pending(now=t0)
        rows.scheduled(now=t0)
    Rows(queue, "b").pending(now=t0)
    later = t0 + timedelta(seconds=30)  # retries still in their 60 s backoff

    exact = _by_type(queue.stats(now=later))
    a = exact["a"]
    assert (a.ready, a.scheduled, a.retrying, a.running, a.dead, a.lower_bounds()) == (3, 6, 3, 3, 3, ())
    capped = _by_type(queue.stats(now=later, cap=3))
    a = capped["a"]
    assert (a.ready, a.scheduled, a.retrying, a.running, a.dead) == (3, 3, 3, 3, 3)
    assert a.lower_bounds() == ("ready", "scheduled", "retrying", "running", "dead")
    assert capped["b"].ready == 1 and capped["b"].lower_bounds() == ()
    # Ages come from the index heads: the same whether counts are capped or not.
    assert a.oldest_wait_seconds == pytest.approx(30, abs=0.01)
    assert a.max_heartbeat_age_seconds == pytest.approx(30, abs=0.01)
    assert exact["a"].oldest_wait_seconds == a.oldest_wait_seconds


def test_every_type_asked_for_is_answered_even_with_nothing_live(queue: Queue) -> None:
    Rows(queue, "done").succeeded()
    Rows(queue, "live").pending()
    got = queue.stats(["done", "live", "never-seen"], cap=10)
    assert [(s.job_type, s.ready, s.running, s.dead) for s in got] == [
        ("done", 0, 0, 0),
        ("live", 1, 0, 0),
        ("never-seen", 0, 0, 0),
    ]
    assert [s.job_type for s in queue.stats()] == ["live"]  # unasked, a type with nothing live is not listed


def test_infinite_timestamps_are_counted_and_give_no_age(dsn: str, queue: Queue) -> None:
    with psycopg.connect(dsn) as conn:
        conn.execute(
            """INSERT INTO pgwork.jobs (job_type, created_at, available_at, idempotency_key)
               VALUES ('inf', '-infinity', '-infinity', 'inf-1'), ('inf', 'infinity', 'infinity', 'inf-2')"""
        )
        conn.execute(
            """INSERT INTO pgwork.jobs (job_type, status, lease_owner, lease_token, lease_expires_at, heartbeat_at,
                                        started_at, idempotency_key)
               VALUES ('inf', 'running', 'w', gen_random_uuid(), 'infinity', '-infinity', now(), 'inf-3')"""
        )
    for cap in (None, 5):
        [s] = queue.stats(["inf"], cap=cap)
        assert (s.ready, s.scheduled, s.running) == (1, 1, 1)
        assert (s.oldest_wait_seconds, s.max_heartbeat_age_seconds) == (0.0, 0.0)
    with psycopg.connect(dsn) as conn:  # the view people read at a psql prompt answers too
        assert conn.execute("SELECT count(*) FROM pgwork.stats").fetchone() == (1,)


def _buffers(dsn: str, cap: int) -> int:
    """Buffers of the reading on a session that has read once already (as the operator's pooled
    connection has: the first call also reads the catalogs to plan)."""
    with psycopg.connect(dsn) as conn:
        query = "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) SELECT * FROM pgwork.backlog(NULL, %s::integer, now())"
        conn.execute(query, [cap])
        row = conn.execute(query, [cap]).fetchone()
    assert row is not None
    plan: dict[str, Any] = row[0][0] if isinstance(row[0], list) else json.loads(row[0])[0]
    top = plan["Plan"]
    return int(top.get("Shared Hit Blocks", 0)) + int(top.get("Shared Read Blocks", 0))


@pytest.mark.slow
def test_the_capped_reading_costs_the_same_at_50k_pending_as_at_100(dsn: str) -> None:
    def add(first: int, last: int) -> None:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(
                """INSERT INTO pgwork.jobs (job_type, payload, idempotency_key)
                   SELECT 'type-' || (g %% 5), '{}', 'k-' || g FROM generate_series(%s::int, %s::int) AS g""",
                [first, last],
            )
            conn.execute("VACUUM ANALYZE pgwork.jobs")

    add(1, 100)
    small = _buffers(dsn, 51)
    add(101, 50_000)
    large = _buffers(dsn, 51)
    print(f"\nbacklog reading, 5 types, cap 51: {small} buffers at 100 pending, {large} at 50,000")
    # Every type's counts stop at the cap: deeper ranges add at most a leaf page or two per count.
    assert large <= small + 30, (small, large)
