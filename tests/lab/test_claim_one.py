"""The claim's one statement, as the installed pgwork.claim runs it under its forced generic plan:
one plan for every limit, never a scan of the whole table."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import psycopg
import pytest

from pgwork.models import NewJob
from pgwork.queue import Queue, claim_statement


def _generic_plan(dsn: str, limit: int) -> str:
    """EXPLAIN ANALYZE of the claim's generic plan (what pgwork.claim runs with)."""
    with psycopg.connect(dsn) as conn:
        text = claim_statement(conn)
    for param, positional in (("owner", "$1"), ("now", "$2"), ("lease", "$3"), ("job_types", "$4"), ("limit", "$5")):
        text = text.replace(f"%({param})s", positional)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SET plan_cache_mode = force_generic_plan")
        conn.execute(f"PREPARE claim_probe (text, timestamptz, float8, text[], int) AS {text}")
        with conn.transaction(force_rollback=True):
            rows = conn.execute(
                f"EXPLAIN (ANALYZE) EXECUTE claim_probe('w', NULL, 30, '{{t}}', {int(limit)})"
            ).fetchall()
    return "\n".join(str(r[0]) for r in rows)


@pytest.mark.parametrize("limit", [1, 50])
def test_prepared_claims_never_scan_the_whole_table(queue: Queue, limit: int) -> None:
    queue.enqueue_many([NewJob("t", {"n": i}) for i in range(5000)])
    with psycopg.connect(queue.dsn, autocommit=True) as conn:
        conn.execute("ANALYZE pgwork.jobs")
    plan = _generic_plan(queue.dsn, limit)
    assert "Seq Scan" not in plan, plan
    assert "Index Scan using jobs_claim_idx" in plan, plan
    assert f"rows={limit} loops=1" in plan.split("\n")[0], plan


def test_claiming_one_at_a_time_keeps_order_types_and_schedule(queue: Queue) -> None:
    t0 = datetime.now(UTC)
    late = queue.enqueue("t", {"n": "late"}, available_at=t0 + timedelta(hours=1))
    other = queue.enqueue("other", {"n": 0}, priority=0)
    ids = [queue.enqueue("t", {"n": i}, priority=100 - i % 3) for i in range(12)]
    got = []
    for _ in range(14):  # past the prepare threshold, so the reused plan is exercised too
        got += queue.claim("w", job_types=["t"], now=t0 + timedelta(seconds=5))
    expected = sorted(ids, key=lambda i: (100 - ids.index(i) % 3, i))
    assert [j.id for j in got] == expected
    assert all(j.lease.attempt == 1 for j in got)
    assert late not in [j.id for j in got] and other not in [j.id for j in got]
    [later] = queue.claim("w", job_types=["t"], now=t0 + timedelta(hours=2))
    assert later.id == late
