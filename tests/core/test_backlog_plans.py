"""The plans the functions run hold under a backlog (migration 29).

The claim runs a generic plan, made from the statistics without knowing the type asked for or the
number of jobs. Two went wrong under a backlog, and both tests read the plans the server ran
inside the functions, through auto_explain sent back as notices:

- a ring segment that ANALYZE saw holding one type was read, for any other type, through its
  any-type index with a filter on the type: the whole segment per claim (300,000 rows, 35-60 ms);
- on a server built with LLVM, a statement whose estimate passes jit_above_cost is compiled first,
  and the any-type claim's estimate grows with the ring: 45-75 ms of compiling per claim at
  600,000 pending jobs. The test makes every statement pass the threshold (jit_above_cost = 0 in
  the session): the session's own query compiles (so the check can see JIT), the functions'
  statements do not.
"""

from __future__ import annotations

import re
import uuid

import psycopg
import pytest

from pgwork.db import Queue
from pgwork.models import NewJob

AUTO_EXPLAIN = (
    "LOAD 'auto_explain'",
    "SET auto_explain.log_min_duration = 0",
    "SET auto_explain.log_nested_statements = on",
    "SET auto_explain.log_analyze = on",
    "SET auto_explain.log_level = 'notice'",
    "SET client_min_messages = notice",
)
JIT_FOR_EVERYTHING = ("SET jit = on", "SET jit_above_cost = 0")


def _jit_available(conn: psycopg.Connection[tuple[object, ...]]) -> bool:
    row = conn.execute("SELECT pg_jit_available()").fetchone()
    return bool(row and row[0])


def _plans(notices: list[str]) -> list[tuple[str, str, bool]]:
    """Each logged plan: its query text's first line, the whole notice, whether it was JIT-compiled."""
    plans = []
    for text in notices:
        if "Query Text:" in text:
            query = text.split("Query Text:", 1)[1].strip().splitlines()[0].strip()
            plans.append((query, text, "JIT:" in text))
    return plans


def test_the_job_life_functions_run_without_jit_even_when_the_session_asks_for_it(dsn: str) -> None:
    queue = Queue(dsn)
    try:
        queue.enqueue_many([NewJob("ocr", {"page": n}) for n in range(3)])
        jobs = queue.claim(owner="w", job_types=["ocr"], limit=2)
        assert len(jobs) == 2
    finally:
        queue.close()
    with psycopg.connect(dsn, autocommit=True) as conn:
        if not _jit_available(conn):
            pytest.skip("this server was built without LLVM: nothing can be JIT-compiled on it")
        notices: list[str] = []
        conn.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
        for statement in (*AUTO_EXPLAIN, *JIT_FOR_EVERYTHING):
            conn.execute(statement)  # type: ignore[arg-type]

        conn.execute("SELECT count(*) FROM pgwork.jobs")
        assert [(q, jit) for q, _, jit in _plans(notices)] == [("SELECT count(*) FROM pgwork.jobs", True)], (
            "the session's own query must compile"
        )

        notices.clear()
        conn.execute("/* top */ SELECT * FROM pgwork.claim('w2', ARRAY['ocr'], 1, 30)").fetchall()
        conn.execute("/* top */ SELECT * FROM pgwork.claim('w3', NULL, 1, 30)").fetchall()
        conn.execute(
            "/* top */ SELECT * FROM pgwork.heartbeat(%s::bigint[], %s::uuid[], 30)",
            ([j.id for j in jobs], [j.lease.token for j in jobs]),
        ).fetchall()
        conn.execute(
            "/* top */ SELECT * FROM pgwork.succeed_many(%s::bigint[], %s::uuid[], %s::jsonb[])",
            ([jobs[0].id], [jobs[0].lease.token], ['{"ok": true}']),
        ).fetchall()
        conn.execute(
            "/* top */ SELECT * FROM pgwork.set_state_if_held(%s, %s, 'pending', NULL, 0, 'boom')",
            (jobs[1].id, jobs[1].lease.token),
        ).fetchall()
        conn.execute("/* top */ SELECT * FROM pgwork.reap(10)").fetchall()
        conn.execute("/* top */ SELECT * FROM pgwork.queue_stats()").fetchall()
        conn.execute(
            "/* top */ INSERT INTO pgwork.jobs (job_type, idempotency_key) VALUES ('ocr', %s)", (f"k-{uuid.uuid4()}",)
        )
        plans = _plans(notices)
    top = [(query, jit) for query, _, jit in plans if query.startswith("/* top */")]
    inside = [(query, text, jit) for query, text, jit in plans if not query.startswith("/* top */")]
    # Every top-level call compiled; the functions' own statements were logged (the ring read,
    # the fenced writes, the triggers') and none of them did.
    assert len(top) == 8 and all(jit for _, jit in top), top
    assert any("FROM pgwork.ready AS c" in text for _, text, _ in inside), [q for q, _, _ in inside]
    assert any("INSERT INTO pgwork.job_results" in text for _, text, _ in inside), [q for q, _, _ in inside]
    assert [query for query, _, jit in inside if jit] == []


def test_a_segment_full_of_one_type_is_not_read_for_another(dsn: str) -> None:
    with psycopg.connect(dsn) as conn:
        conn.execute("INSERT INTO pgwork.jobs (job_type, idempotency_key) VALUES ('other', 'o-1'), ('other', 'o-2')")
        conn.execute(
            "INSERT INTO pgwork.jobs (job_type, payload, idempotency_key) "
            "SELECT 'bulk', '{}', 'b-' || g FROM generate_series(1, 5000) AS g"
        )
        # What the ring holds once a team enqueued a batch 10 s after another's jobs came: the
        # batch alone in the next segment (moved there rather than waiting for the boundary).
        conn.execute("UPDATE pgwork.ready SET segment = (segment + 1) % 8 WHERE job_type = 'bulk'")
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("ANALYZE pgwork.ready")  # as autovacuum would, once the segment filled
        by_segment = conn.execute("SELECT tableoid, array_agg(DISTINCT job_type) FROM pgwork.ready GROUP BY 1")
        assert sorted(types for _, types in by_segment.fetchall()) == [["bulk"], ["other"]]
        notices: list[str] = []
        conn.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
        for statement in AUTO_EXPLAIN:
            conn.execute(statement)  # type: ignore[arg-type]
        with conn.transaction(force_rollback=True):
            claimed = conn.execute("SELECT job_type FROM pgwork.claim('w', ARRAY['other'], 1, 30)").fetchall()
        assert claimed == [("other",)]
    picks = [text for query, text, _ in _plans(notices) if query.startswith("WITH picked")]
    assert len(picks) == 1, [query for query, _, _ in _plans(notices)]
    scans = [line.strip() for line in picks[0].splitlines() if "Index Scan" in line and " on ready_" in line]
    assert len(scans) == 8, picks[0]  # one per segment
    # Each segment is entered at the type asked for: nothing of bulk's is read and thrown away.
    assert all("_job_type_priority_available_at_job_id_idx" in scan for scan in scans), scans
    removed = [int(n) for n in re.findall(r"Rows Removed by Filter: (\d+)", picks[0])]
    assert sum(removed) < 10, picks[0]
