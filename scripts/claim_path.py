"""Claim latency, side by side in one run: version 1's claim statement sent directly (what the
Queue sent before migration 0002) against the pgwork.claim function the Queue calls now, each on
its own prepared connection, interleaved call by call (order alternating) so load on the machine
falls on both alike. Also claim + succeed both ways. Prints figures; asserts nothing.

    python scripts/claim_path.py [--dsn postgresql://postgres@127.0.0.1:5432/postgres] [--claims 3000]
"""

from __future__ import annotations

import argparse
import statistics
import time
import uuid
from collections.abc import Callable
from typing import Any

import psycopg
from psycopg import sql
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from pgwork import sql_files
from pgwork.dsn import with_dbname
from pgwork.models import NewJob
from pgwork.queue import Queue, migrate

# Version 1's claim_one and succeed, as queries.sql held them.
V1_CLAIM = """
UPDATE pgwork.jobs AS j
   SET status = 'running', started_at = coalesce(%(now)s::timestamptz, now()), attempt_count = j.attempt_count + 1,
       lease_owner = %(owner)s, lease_token = gen_random_uuid(),
       lease_expires_at = coalesce(%(now)s::timestamptz, now()) + make_interval(secs => %(lease)s),
       heartbeat_at = coalesce(%(now)s::timestamptz, now()), cancel_requested_at = NULL
 WHERE j.id = ANY (ARRAY(
        SELECT c.id FROM pgwork.jobs AS c
         WHERE c.status = 'pending' AND c.available_at <= coalesce(%(now)s::timestamptz, now())
           AND (%(job_types)s::text[] IS NULL OR c.job_type = ANY (%(job_types)s::text[]))
         ORDER BY c.priority, c.available_at, c.id LIMIT 1 FOR UPDATE SKIP LOCKED))
RETURNING j.id, j.job_type, j.payload, j.priority, j.attempt_count, j.max_attempts, j.idempotency_key,
          j.trace_context, j.lease_owner, j.lease_token, j.lease_expires_at, j.created_at, j.last_error"""
V1_SUCCEED = """
WITH fenced AS (
    UPDATE pgwork.jobs AS j SET status = 'succeeded', completed_at = coalesce(%(now)s::timestamptz, now()),
           lease_token = NULL, lease_expires_at = NULL, cancel_requested_at = NULL
     WHERE j.id = %(id)s AND j.lease_token = %(token)s AND j.status = 'running'
    RETURNING j.id, j.job_type, j.idempotency_key
), inserted AS (
    INSERT INTO pgwork.job_results (idempotency_key, job_id, job_type, produced_by, result)
    SELECT f.idempotency_key, f.id, f.job_type, %(owner)s, %(result)s FROM fenced AS f
    ON CONFLICT (idempotency_key) DO NOTHING RETURNING idempotency_key
)
SELECT (SELECT count(*) FROM fenced) AS fenced, (SELECT count(*) FROM inserted) AS inserted"""


def _ms(values: list[float]) -> str:
    p50, p95, mean = statistics.median(values), statistics.quantiles(values, n=20)[18], statistics.fmean(values)
    return f"p50 {p50 * 1000:.3f} ms, p95 {p95 * 1000:.3f} ms, mean {mean * 1000:.3f} ms"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dsn", default="postgresql://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--claims", type=int, default=3000)
    args = parser.parse_args()
    name = f"pgwork_bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(args.dsn, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {} TEMPLATE template0 ENCODING 'UTF8'").format(sql.Identifier(name)))
    dsn = with_dbname(args.dsn, name)
    try:
        migrate(dsn)
        with Queue(dsn, pool_size=1) as q:
            q.enqueue_many([NewJob("bench", {"n": i}) for i in range(4 * args.claims + 10)])
        with psycopg.connect(dsn) as conn:
            conn.execute("ANALYZE pgwork.jobs")
            conn.commit()
        kw: dict[str, Any] = {"autocommit": True, "row_factory": dict_row, "prepare_threshold": 5}
        with psycopg.connect(dsn, **kw) as direct, psycopg.connect(dsn, **kw) as function:
            params = {"owner": "bench", "job_types": None, "limit": 1, "lease": 30.0, "now": None}

            def v1_claim() -> dict[str, Any]:
                row = direct.execute(V1_CLAIM, params).fetchone()  # type: ignore[arg-type]
                assert row is not None
                return row

            def v2_claim() -> dict[str, Any]:
                row = function.execute(sql_files.query("claim"), params).fetchone()
                assert row is not None
                return row

            def v1_cycle() -> None:
                row = v1_claim()
                done = {
                    "id": row["id"],
                    "token": row["lease_token"],
                    "owner": "bench",
                    "result": Jsonb({}),
                    "now": None,
                }
                direct.execute(V1_SUCCEED, done)  # type: ignore[arg-type]

            def v2_cycle() -> None:
                row = v2_claim()
                done = {"id": row["id"], "token": row["lease_token"], "result": Jsonb({}), "now": None}
                function.execute(sql_files.query("succeed"), done)

            for label, first, second in (
                ("claim", v1_claim, v2_claim),
                ("claim + succeed", v1_cycle, v2_cycle),
            ):
                times = _interleave(first, second, args.claims)
                print(f"{label}, version 1 statement sent directly: {_ms(times[0])}")
                print(f"{label}, pgwork.claim function (now):        {_ms(times[1])}")
    finally:
        with psycopg.connect(args.dsn, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))


def _interleave(a: Callable[[], object], b: Callable[[], object], n: int) -> tuple[list[float], list[float]]:
    times: tuple[list[float], list[float]] = ([], [])
    for i in range(n):
        order = ((0, a), (1, b)) if i % 2 == 0 else ((1, b), (0, a))
        for slot, call in order:
            t0 = time.perf_counter()
            call()
            times[slot].append(time.perf_counter() - t0)
    return times


if __name__ == "__main__":
    main()
