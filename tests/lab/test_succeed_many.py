"""Queue.succeed_many: batched completions keep succeed's fencing and one-result rule."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

import pytest

from pgwork.db import Queue, new_token
from pgwork.errors import InvalidArgument
from pgwork.models import Completion, NewJob


def test_each_held_lease_succeeds_and_writes_its_result(queue: Queue) -> None:
    queue.enqueue_many([NewJob("t", {"n": i}) for i in range(5)])
    jobs = queue.claim("w", limit=5)
    outcomes = queue.succeed_many([(j.lease, {"n": j.payload["n"] * 10}) for j in jobs])
    assert outcomes == {j.id: Completion.CREATED for j in jobs}
    for j in jobs:
        row = queue.job(j.id)
        assert row is not None and row.status == "succeeded" and row.lease_token is None
        result = queue.result(j.idempotency_key)
        assert result is not None
        assert result.result == {"n": j.payload["n"] * 10}
        assert result.produced_by == "w" and result.job_id == j.id


def test_a_stale_token_writes_nothing_while_the_rest_of_the_batch_succeeds(queue: Queue) -> None:
    queue.enqueue_many([NewJob("t", {"n": i}) for i in range(3)])
    jobs = queue.claim("w", limit=3)
    stale = dataclasses.replace(jobs[1].lease, token=new_token())
    outcomes = queue.succeed_many([(jobs[0].lease, 1), (stale, 2), (jobs[2].lease, 3)])
    assert outcomes == {
        jobs[0].id: Completion.CREATED,
        jobs[1].id: Completion.LEASE_LOST,
        jobs[2].id: Completion.CREATED,
    }
    held = queue.job(jobs[1].id)
    assert held is not None and held.status == "running" and held.lease_token == jobs[1].lease.token
    assert queue.result(jobs[1].idempotency_key) is None


def test_a_reclaimed_job_refuses_the_old_holder_and_accepts_the_new(queue: Queue) -> None:
    t0 = datetime.now(UTC)
    queue.enqueue("t", {"n": 1}, now=t0 - timedelta(seconds=1))
    [first] = queue.claim("old", lease=5, now=t0)
    assert [r.id for r in queue.reap(now=t0 + timedelta(seconds=10))] == [first.id]
    [second] = queue.claim("new", lease=5, now=t0 + timedelta(seconds=11))
    assert queue.succeed_many([(first.lease, "old")]) == {first.id: Completion.LEASE_LOST}
    assert queue.succeed_many([(second.lease, "new")]) == {second.id: Completion.CREATED}
    result = queue.result(second.idempotency_key)
    assert result is not None and result.result == "new" and result.produced_by == "new"
    row = queue.job(first.id)
    assert row is not None and row.attempt_count == 2


def test_two_jobs_sharing_a_key_write_one_result(queue: Queue) -> None:
    queue.enqueue_many([NewJob("t", {"n": 1}, key="invoice-1"), NewJob("t", {"n": 2}, key="invoice-1")])
    jobs = queue.claim("w", limit=2)
    outcomes = queue.succeed_many([(j.lease, {"from": j.id}) for j in jobs])
    assert sorted(outcomes.values(), key=lambda c: c.value) == [Completion.ALREADY_EXISTED, Completion.CREATED]
    winner = next(i for i, c in outcomes.items() if c is Completion.CREATED)
    result = queue.result("invoice-1")
    assert result is not None and result.job_id == winner and result.result == {"from": winner}
    assert all(getattr(queue.job(j.id), "status", None) == "succeeded" for j in jobs)


def test_a_key_already_written_by_an_earlier_run_is_kept(queue: Queue) -> None:
    queue.enqueue("t", {"n": 1}, key="k")
    [a] = queue.claim("a")
    assert queue.succeed(a.lease, "first") is Completion.CREATED
    queue.enqueue("t", {"n": 2}, key="k")
    [b] = queue.claim("b")
    assert queue.succeed_many([(b.lease, "second")]) == {b.id: Completion.ALREADY_EXISTED}
    result = queue.result("k")
    assert result is not None and result.result == "first" and result.produced_by == "a"


def test_completing_twice_is_refused_the_second_time(queue: Queue) -> None:
    queue.enqueue("t", {})
    [job] = queue.claim("w")
    assert queue.succeed_many([(job.lease, 1)]) == {job.id: Completion.CREATED}
    assert queue.succeed_many([(job.lease, 2)]) == {job.id: Completion.LEASE_LOST}
    result = queue.result(job.idempotency_key)
    assert result is not None and result.result == 1


@pytest.mark.parametrize(
    ("result", "field"),
    [({"x": float("nan")}, "result"), ({"x": object()}, "result"), ("a\x00b", "result")],
)
def test_a_bad_result_fails_before_anything_is_written(queue: Queue, result: object, field: str) -> None:
    queue.enqueue_many([NewJob("t", {"n": i}) for i in range(2)])
    jobs = queue.claim("w", limit=2)
    with pytest.raises(InvalidArgument) as err:
        queue.succeed_many([(jobs[0].lease, "fine"), (jobs[1].lease, result)])
    assert err.value.field == field
    assert all(getattr(queue.job(j.id), "status", None) == "running" for j in jobs)


def test_the_same_lease_twice_in_one_batch_is_refused(queue: Queue) -> None:
    queue.enqueue("t", {})
    [job] = queue.claim("w")
    with pytest.raises(InvalidArgument, match="more than once"):
        queue.succeed_many([(job.lease, 1), (job.lease, 2)])
    assert getattr(queue.job(job.id), "status", None) == "running"


def test_nothing_to_complete_sends_nothing(queue: Queue) -> None:
    assert queue.succeed_many([]) == {}
