"""Claiming: one atomic statement, never the same job to two claimers."""

from __future__ import annotations

import threading
from collections import Counter
from datetime import UTC, datetime, timedelta

import psycopg
import pytest

from pgwork.db import Queue
from pgwork.errors import InvalidArgument
from pgwork.models import NewJob


def test_sixteen_claimers_400_jobs_each_claimed_once(dsn: str) -> None:
    q = Queue(dsn, pool_size=16)
    try:
        q.enqueue_many([NewJob("doc", {"n": i}) for i in range(400)])
        claims: list[tuple[str, int]] = []
        lock = threading.Lock()
        start = threading.Barrier(16)

        def claimer(name: str) -> None:
            start.wait()  # all idle workers poll at the same instant: the lab's worst case
            while True:
                jobs = q.claim(name, limit=1)
                if not jobs:
                    return
                with lock:
                    claims.extend((name, j.id) for j in jobs)
                q.succeed(jobs[0].lease, {"by": name})

        threads = [threading.Thread(target=claimer, args=(f"w{i}",)) for i in range(16)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        assert len(claims) == 400
        counts = Counter(job_id for _, job_id in claims)
        assert max(counts.values()) == 1
        assert len({name for name, _ in claims}) > 1  # the work really was shared
        with psycopg.connect(dsn) as conn:
            attempts = conn.execute("SELECT attempt_count, count(*) FROM pgwork.jobs GROUP BY 1").fetchall()
            results = conn.execute("SELECT count(*) FROM pgwork.job_results").fetchone()
        assert attempts == [(1, 400)]
        assert results == (400,)
    finally:
        q.close()


def test_claim_order_priority_then_age(queue: Queue) -> None:
    late = queue.enqueue("doc", {"n": 1}, priority=100)
    urgent = queue.enqueue("doc", {"n": 2}, priority=1)
    early = queue.enqueue("doc", {"n": 3}, priority=100)
    assert [j.id for j in queue.claim("w", limit=3)] == [urgent, late, early]


def test_claim_filters_job_types_and_availability(queue: Queue) -> None:
    ocr = queue.enqueue("ocr", {"n": 1})
    queue.enqueue("embed", {"n": 2})
    later = queue.enqueue("ocr", {"n": 3}, delay=60)
    assert [j.id for j in queue.claim("w", job_types=["ocr"], limit=10)] == [ocr]
    assert queue.claim("w", job_types=["ocr"]) == []  # the delayed one is not ready yet
    future = datetime.now(UTC) + timedelta(seconds=61)
    assert [j.id for j in queue.claim("w", job_types=["ocr"], now=future)] == [later]


# pgwork.claim called directly (a worker-profile role may): each job_types value takes the arm
# it names (migration 28: any type when NULL, else the types listed), in global priority order; NULL
# and duplicate names in the list match nothing more.
@pytest.mark.parametrize(
    ("job_types", "expected"),
    [
        (None, ["b", "a", "c"]),
        (["a"], ["a"]),
        (["a", "a"], ["a"]),
        (["c", "b"], ["b", "c"]),
        (["a", "b", "c"], ["b", "a", "c"]),
        ([], []),
        ([None], []),
        (["a", None], ["a"]),
        (["zzz"], []),
    ],
)
def test_the_claim_function_takes_the_arm_its_types_name(
    queue: Queue, dsn: str, job_types: list[str | None] | None, expected: list[str]
) -> None:
    queue.enqueue("a", {}, priority=5)
    queue.enqueue("b", {}, priority=1)
    queue.enqueue("c", {}, priority=9)
    claimed: dict[int, list[tuple[str, int]]] = {}
    for limit in (1, 10):
        with psycopg.connect(dsn) as conn, conn.transaction(force_rollback=True):
            claimed[limit] = conn.execute(
                "SELECT job_type, attempt_count FROM pgwork.claim('w', %s::text[], %s, 30)", [job_types, limit]
            ).fetchall()
    # The rows come back in lock order; what was taken is the set, and one job is the first by priority.
    assert sorted(t for t, _ in claimed[10]) == sorted(expected)
    assert [t for t, _ in claimed[1]] == expected[:1]
    assert all(attempts == 1 for _, attempts in claimed[1] + claimed[10])
    # Rolled back: every job is still pending and in the ring, for the claim that follows.
    assert sorted(j.job_type for j in queue.claim("w", limit=10)) == ["a", "b", "c"]


def test_claim_sets_the_lease(queue: Queue) -> None:
    job_id = queue.enqueue("ocr", {"n": 1}, key="invoice-1")
    at = datetime.now(UTC) + timedelta(seconds=1)
    [job] = queue.claim("pod-a", lease=45, now=at)
    row = queue.job(job_id)
    assert row is not None
    assert row.status == "running" and row.lease_owner == "pod-a"
    assert row.lease_token == job.lease.token
    assert row.lease_expires_at == at + timedelta(seconds=45)
    assert row.heartbeat_at == at and row.attempt_count == 1
    assert job.idempotency_key == "invoice-1" and job.attempt == 1


def test_each_claim_mints_a_new_token(queue: Queue) -> None:
    queue.enqueue("ocr", {"n": 1})
    [first] = queue.claim("pod-a", lease=1)
    later = datetime.now(UTC) + timedelta(seconds=5)
    queue.reap(now=later)
    [second] = queue.claim("pod-a", lease=30, now=later)  # same name, new pod: a different owner
    assert second.id == first.id and second.lease.token != first.lease.token
    assert second.attempt == 2


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"owner": ""}, "owner"),
        ({"limit": 0}, "limit"),
        ({"lease": 0}, "lease"),
        ({"lease": -5}, "lease"),
        ({"job_types": []}, "job_types"),
        ({"job_types": [""]}, "job_types"),
    ],
)
def test_bad_claim_arguments(queue: Queue, kwargs: dict[str, object], field: str) -> None:
    args: dict[str, object] = {"owner": "w"} | kwargs
    with pytest.raises(InvalidArgument) as info:
        queue.claim(**args)  # type: ignore[arg-type]
    assert info.value.field == field


def test_enqueue_many_is_one_statement_all_or_nothing(queue: Queue) -> None:
    with pytest.raises(InvalidArgument, match="priority"):
        queue.enqueue_many([NewJob("ok", {"n": 1}), NewJob("bad", {"n": 2}, priority=-3)])
    assert queue.stats() == []
    ids = queue.enqueue_many([NewJob("a", {"n": i}) for i in range(3)])
    assert ids == sorted(ids) and len(ids) == 3


def test_enqueue_inside_the_callers_transaction(queue: Queue, dsn: str) -> None:
    with psycopg.connect(dsn) as conn, conn.transaction():
        queue.enqueue("ocr", {"n": 1}, conn=conn)
        with conn.transaction(force_rollback=True):
            queue.enqueue("ocr", {"n": 2}, conn=conn)
        # the business write rolled back: so did its job
    [stats] = queue.stats()
    assert stats.ready == 1


def test_enqueue_notifies_listeners(queue: Queue, dsn: str) -> None:
    listener = queue.listener()
    try:
        assert listener.wait(0.05) == set()
        queue.enqueue("ocr", {"n": 1})
        with psycopg.connect(dsn, autocommit=True) as other:  # a plain INSERT from another service
            other.execute("INSERT INTO pgwork.jobs (job_type, idempotency_key) VALUES ('embed', 'k1')")
        seen: set[str] = set()
        for _ in range(20):
            seen |= listener.wait(0.5)
            if seen >= {"ocr", "embed"}:
                break
        assert seen == {"ocr", "embed"}
    finally:
        listener.close()
