"""The console's reads are bounded whatever the filter: find_jobs walks jobs_pkey backwards for at
most `scan` jobs (a rare error text or payload value costs no more than a common one), the
chart's buckets read index ranges, and none of them scans the table. Plans from auto_explain
(nested statements: the functions' own), as tests/core/test_finish_by_key.py reads them."""

from __future__ import annotations

import re

import psycopg
import pytest

from pgwork.db import Queue
from pgwork.models import NewJob
from pgwork.sql_files import Statements
from tests.support.plans import auto_explain_plans

pytest.importorskip("jinja2")

SQL = Statements("pgwork.ui", "sql/console.sql")
JOBS, SCAN = 12_000, 2_000


def _params(**given: object) -> dict[str, object]:
    return {
        "job_types": None,
        "statuses": None,
        "error": None,
        "created_from": None,
        "created_to": None,
        "before": None,
        "scan": SCAN,
        "lim": 50,
        "error_chars": 300,
        "now": None,
        "path": None,
        "value": None,
    } | given


@pytest.mark.slow
def test_a_search_reads_at_most_its_window_and_never_the_table(dsn: str) -> None:
    with Queue(dsn) as q:
        q.enqueue_many([NewJob("bulk", {"n": i, "tenant": i % 7}) for i in range(JOBS)])
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(
                "UPDATE pgwork.jobs SET status = 'dead', completed_at = now() - id * interval '1 second', "
                "last_error = 'boom' WHERE id % 20 = 0"
            )
            conn.execute("ANALYZE pgwork.jobs")
    with psycopg.connect(dsn, autocommit=True) as conn:
        plans = auto_explain_plans(conn)
        searches = [
            ("find_jobs", _params(error="no such error anywhere")),  # matches nothing: the whole window
            ("find_jobs", _params(statuses=["dead"], job_types=["bulk"])),
            ("find_jobs_contents", _params(path=["tenant"], value="3")),
            ("find_jobs_contents", _params(path=["tenant"], value="99", before=JOBS // 2)),
        ]
        for name, params in searches:
            conn.execute(SQL.query(name), params)
        conn.execute(SQL.query("job_window"), {"before": None, "scan": SCAN})
        conn.execute(SQL.query("finished_buckets"), {"buckets": 12, "bucket_seconds": 3600.0, "cap": 1000, "now": None})
        conn.execute(SQL.query("dead_letters"), {"lim": 50, "error_chars": 300})
    inner = [p for p in plans if "pgwork.jobs" in p and "Query Text: SELECT * FROM" not in p]
    scans = [p for p in inner if "window_" in p]
    assert len(scans) == 4, plans
    for plan in scans:
        assert "Index Scan Backward using jobs_pkey" in plan, plan
        # Never the jobs table (nor history). A join's scan of worker_leases, one row a worker, is
        # the planner's choice to make: on a server whose autovacuum has not analyzed that table yet
        # (PostgreSQL 18, embedded) it guesses 810 rows and hashes them.
        assert not re.search(r"Seq Scan on (jobs|job_history\w*) ", plan), plan
        walked = [int(n) for n in re.findall(r"Index Scan Backward using jobs_pkey.*?actual time=\S+ rows=(\d+)", plan)]
        assert walked and max(walked) <= SCAN, plan
    for plan in inner:
        assert "Seq Scan on jobs" not in plan, plan
    # Dead letters: the newest 50 straight off jobs_dead_idx, no sort of every dead job.
    (dead,) = [p for p in inner if "j.status = 'dead'" in p and "ORDER BY j.completed_at DESC" in p]
    assert "Index Scan Backward using jobs_dead" in dead and "Sort" not in dead, dead
    # PostgreSQL 18 prints the rows as 50.00.
    assert re.search(r"Index Scan Backward using jobs_dead\w* on jobs j .*?rows=50(?:\.00)? loops=1", dead, re.S), dead
