"""Bulk enqueue: enqueue_many past the COPY threshold and load_jobs write exactly the rows the
one-statement enqueue writes, all or none, in the caller's transaction when given one, and only
what a producer may write."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from psycopg.rows import dict_row

from pgwork.db import Queue
from pgwork.db.bulk import BULK_THRESHOLD
from pgwork.errors import InvalidArgument
from pgwork.models import NewJob
from tests.support.db import MakeRole

NOW = datetime(2030, 1, 1, tzinfo=UTC)
# What a row says about a job, whichever path wrote it.
SHAPE = "job_type, payload, status::text, priority, attempt_count, max_attempts, available_at, idempotency_key, " + (
    "trace_context, lease_owner, lease_token, started_at, completed_at"
)
# Values COPY's text format would misread unless escaped, and text beyond ASCII.
AWKWARD = {"path": "C:\\docs\\a\tb\nc\rd", "quote": '"', "nul_lookalike": "\\u0000", "name": "Zoë 東京 🎉"}


def _jobs(count: int, offset: int = 0) -> list[NewJob]:
    jobs = []
    for n in range(offset, offset + count):
        jobs.append(
            NewJob(
                "ocr\\scan" if n % 3 == 0 else "ocr",
                {"n": n, **AWKWARD} if n % 2 == 0 else {"n": n},
                key=f"key\t{n}" if n % 5 == 0 else None,
                priority=n % 7,
                delay=(n % 4) * 1.5 if n % 11 else None,
                available_at=NOW + timedelta(hours=n) if n % 11 == 0 else None,
                max_attempts=1 + n % 3,
                trace_context={"traceparent": f"00-{n:032x}-{n:016x}-01"} if n % 4 == 0 else {},
            )
        )
    return jobs


def _rows(dsn: str, ids: list[int] | None = None) -> list[dict[str, Any]]:
    with psycopg.connect(dsn, row_factory=dict_row) as conn:
        query = f"SELECT {SHAPE} FROM pgwork.jobs WHERE %s::bigint[] IS NULL OR id = ANY (%s) ORDER BY id"
        return conn.execute(query, (ids, ids)).fetchall()


def _count(dsn: str) -> int:
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT count(*) FROM pgwork.jobs").fetchone()
    assert row is not None
    return int(row[0])


def test_copy_paths_write_the_rows_enqueue_writes(queue: Queue, dsn: str) -> None:
    count = BULK_THRESHOLD + 200
    jobs = _jobs(count)
    one_by_one = [queue.enqueue_many([job], now=NOW)[0] for job in jobs]
    staged = queue.enqueue_many(iter(jobs), now=NOW)  # a generator, as a backfill streams it
    assert len(staged) == count and staged == sorted(staged) and staged[0] > one_by_one[-1]
    assert queue.load_jobs(jobs, now=NOW) == count
    reference = _rows(dsn, one_by_one)
    assert reference[0]["payload"] == {"n": 0, **AWKWARD} and reference[0]["idempotency_key"] == "key\t0"
    assert _rows(dsn, staged) == reference, "enqueue_many's COPY path differs from enqueue"
    everything = _rows(dsn)
    assert everything[2 * count :] == reference, "load_jobs differs from enqueue"
    assert {r["status"] for r in everything} == {"pending"}


def test_one_bad_job_writes_none_and_is_named_by_place_and_field(queue: Queue, dsn: str) -> None:
    jobs = _jobs(BULK_THRESHOLD + 600)
    jobs[BULK_THRESHOLD + 500] = NewJob("ocr", {"n": float("nan")})
    for write in (queue.enqueue_many, queue.load_jobs):
        with pytest.raises(InvalidArgument) as caught:
            write(jobs)
        assert caught.value.field == "payload"
        assert f"job {BULK_THRESHOLD + 500} of the batch" in str(caught.value)
        assert "NaN" in str(caught.value)
    assert _count(dsn) == 0


def test_in_the_callers_transaction_the_jobs_exist_iff_it_commits(queue: Queue, dsn: str) -> None:
    jobs = _jobs(BULK_THRESHOLD + 10)
    with psycopg.connect(dsn) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS public.bulk_business (n int)")
        conn.commit()
        conn.execute("INSERT INTO public.bulk_business VALUES (1)")
        queue.enqueue_many(jobs, conn=conn)
        queue.load_jobs(jobs, conn=conn)
        queue.enqueue_many(jobs, conn=conn)  # twice in one transaction: the staging table is dropped after use
        assert _count(dsn) == 0, "visible before the caller committed"
        conn.rollback()
        assert _count(dsn) == 0
        queue.enqueue_many(jobs, conn=conn)
        queue.load_jobs(jobs, conn=conn)
        conn.commit()
    assert _count(dsn) == 2 * len(jobs)


def test_a_producer_loads_in_bulk_and_new_rows_start_pending(dsn: str, make_role: MakeRole) -> None:
    producer = make_role("producer")
    with Queue(producer) as q:
        ids = q.enqueue_many(_jobs(BULK_THRESHOLD + 1))
        assert q.load_jobs(_jobs(BULK_THRESHOLD + 1)) == BULK_THRESHOLD + 1
    rows = _rows(dsn)
    assert len(rows) == 2 * (BULK_THRESHOLD + 1) and len(ids) == BULK_THRESHOLD + 1
    assert {(r["status"], r["attempt_count"], r["lease_owner"], r["lease_token"]) for r in rows} == {
        ("pending", 0, None, None)
    }
    # The database holds the line too: a producer's own COPY naming the life's columns is refused.
    for statement in (
        "COPY pgwork.jobs (job_type, idempotency_key, status) FROM STDIN",
        "COPY pgwork.jobs (job_type, idempotency_key, attempt_count) FROM STDIN",
        "COPY pgwork.jobs (job_type, idempotency_key, lease_owner, lease_token, lease_expires_at) FROM STDIN",
    ):
        with (
            psycopg.connect(producer) as conn,
            pytest.raises(psycopg.errors.InsufficientPrivilege),
            conn.cursor().copy(statement) as copy,
        ):
            copy.write("ocr\tk\trunning\n")


@pytest.mark.parametrize("profile", ["reader", "reaper"])
def test_roles_without_the_producer_profile_cannot_load(dsn: str, make_role: MakeRole, profile: str) -> None:
    role = make_role(profile)
    with Queue(role) as q:
        for write in (q.enqueue_many, q.load_jobs):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                write(_jobs(BULK_THRESHOLD + 1))
    assert _count(dsn) == 0


def test_progress_is_reported_as_rows_are_sent(queue: Queue) -> None:
    heard: list[int] = []
    queue.load_jobs(_jobs(12_000), on_progress=heard.append)
    assert heard == sorted(heard) and heard[-1] == 12_000 and len(heard) >= 3


def test_many_bulk_loads_on_one_pooled_connection(dsn: str) -> None:
    # Past the pool's prepare threshold the staging statements run prepared, against a staging
    # table created anew each time.
    with Queue(dsn, pool_size=1) as q:
        for round_ in range(7):
            ids = q.enqueue_many(NewJob("ocr", {"n": n, "round": round_}) for n in range(BULK_THRESHOLD + 1))
            assert len(ids) == len(set(ids)) == BULK_THRESHOLD + 1
            assert q.load_jobs(NewJob("ocr", {"n": n}) for n in range(BULK_THRESHOLD + 1)) == BULK_THRESHOLD + 1
    assert _count(dsn) == 14 * (BULK_THRESHOLD + 1)
