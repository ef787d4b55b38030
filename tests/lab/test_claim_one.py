"""The claim's one statement, as the installed pgwork.claim runs it under its forced generic plan:
one plan for every limit, never a scan of the whole table."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

from pgwork.db import Queue, claim_statement
from pgwork.models import NewJob
from tests.support.plans import plan_nodes


def _generic_plan(dsn: str, limit: int) -> dict[str, Any]:
    """EXPLAIN ANALYZE (as JSON) of the claim's generic plan (what pgwork.claim runs with)."""
    with psycopg.connect(dsn) as conn:
        text = claim_statement(conn)
    for param, positional in (("owner", "$1"), ("now", "$2"), ("lease", "$3"), ("job_types", "$4"), ("limit", "$5")):
        text = text.replace(f"%({param})s", positional)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SET plan_cache_mode = force_generic_plan")
        conn.execute(f"PREPARE claim_probe (text, timestamptz, float8, text[], int) AS {text}")
        with conn.transaction(force_rollback=True):
            row = conn.execute(
                f"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) EXECUTE claim_probe('w', NULL, 30, '{{t}}', {int(limit)})"
            ).fetchone()
    assert row is not None
    return dict(row[0][0]["Plan"])


@pytest.mark.parametrize("limit", [1, 50])
def test_prepared_claims_never_scan_the_whole_table(queue: Queue, limit: int) -> None:
    queue.enqueue_many([NewJob("t", {"n": i}) for i in range(5000)])
    with psycopg.connect(queue.dsn, autocommit=True) as conn:
        conn.execute("ANALYZE pgwork.jobs, pgwork.ready")
    plan = _generic_plan(queue.dsn, limit)
    scans = [(node["Node Type"], node.get("Index Name")) for node in plan_nodes(plan)]
    # A ready segment the statistics know to be empty may be planned as a sequential scan: it reads
    # no page (and the jobs table is never scanned).
    seq = [
        (n.get("Relation Name"), int(n.get("Shared Hit Blocks", 0)) + int(n.get("Shared Read Blocks", 0)))
        for n in plan_nodes(plan)
        if n["Node Type"] == "Seq Scan"
    ]
    assert all(name != "jobs" and blocks == 0 for name, blocks in seq), seq
    assert any(
        kind == "Index Scan" and re.fullmatch(r"ready_\d_job_type_priority_available_at_job_id_idx", name or "")
        for kind, name in scans
    ), scans
    # PostgreSQL 18 reports actual rows as a fraction (1.00), earlier versions as an integer.
    assert (float(plan["Actual Rows"]), plan["Actual Loops"]) == (limit, 1), plan


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
