"""The claim's cost must not grow with history: it reads the partial index, not the table."""

from __future__ import annotations

import json
from typing import Any

import psycopg
import pytest

from pgwork.models import NewJob
from pgwork.queue import Queue, claim_statement


def _explain_claim(dsn: str) -> dict[str, Any]:
    # EXPLAIN ANALYZE runs the UPDATE: the forced rollback undoes it.
    with (
        psycopg.connect(dsn) as conn,
        psycopg.ClientCursor(conn) as cur,
        conn.transaction(force_rollback=True),
    ):
        # EXPLAIN of the function call cannot see inside it: explain the statement it runs, read
        # back from the installed function so the two cannot drift.
        cur.execute(
            "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + claim_statement(conn),
            {"owner": "w", "job_types": None, "limit": 1, "lease": 30.0, "now": None},
        )
        row = cur.fetchone()
    assert row is not None
    plan: dict[str, Any] = row[0][0] if isinstance(row[0], list) else json.loads(row[0])[0]
    return plan


def _nodes(node: dict[str, Any]) -> list[dict[str, Any]]:
    found = [node]
    for child in node.get("Plans", []):
        found.extend(_nodes(child))
    return found


def _buffers(node: dict[str, Any]) -> int:
    return int(node.get("Shared Hit Blocks", 0)) + int(node.get("Shared Read Blocks", 0))


def _summary(plan: dict[str, Any]) -> tuple[set[str], int, int, float]:
    """Scans used, buffers to find the job (the Limit over the locking scan), buffers in all, ms."""
    nodes = _nodes(plan["Plan"])
    scans = {
        f"{n['Node Type']}:{n.get('Index Name', n.get('Relation Name', ''))}" for n in nodes if "Scan" in n["Node Type"]
    }
    [find] = [n for n in nodes if n["Node Type"] == "Limit"]
    return scans, _buffers(find), _buffers(plan["Plan"]), float(plan["Execution Time"])


@pytest.mark.slow
def test_claim_uses_the_partial_index_under_100k_history_rows(dsn: str) -> None:
    q = Queue(dsn)
    try:
        q.enqueue_many([NewJob("doc", {"n": i}) for i in range(500)])
    finally:
        q.close()
    with psycopg.connect(dsn) as conn:
        conn.execute("ANALYZE pgwork.jobs")
    _scans_before, find_before, total_before, ms_before = _summary(_explain_claim(dsn))

    with psycopg.connect(dsn) as conn:
        conn.execute(
            """INSERT INTO pgwork.jobs (job_type, payload, status, attempt_count, started_at, completed_at,
                                        lease_owner, idempotency_key)
               SELECT 'doc', jsonb_build_object('old', g), 'succeeded', 1, now(), now(), 'w', 'old-' || g
                 FROM generate_series(1, 100000) AS g"""
        )
        conn.execute("ANALYZE pgwork.jobs")
    scans_after, find_after, total_after, ms_after = _summary(_explain_claim(dsn))

    for label, find, total, ms in (
        ("0", find_before, total_before, ms_before),
        ("100,000", find_after, total_after, ms_after),
    ):
        print(
            f"\nclaim at {label} history rows: {find} buffers to find the job, {total} in all "
            f"(with the row and index writes), {ms:.3f} ms"
        )
    assert "Index Scan:jobs_claim_idx" in scans_after, scans_after
    assert not any(s.startswith("Seq Scan") for s in scans_after)
    assert find_after <= 10, find_after  # the lab measured 4-7; history must not add to it
    assert total_after <= total_before + 5
