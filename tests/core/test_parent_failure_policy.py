"""A job's policy for a parent that fails (migration 26), against a real database: with
on_parent_failure="run" a dead or cancelled parent counts as ended, so the child runs once every
parent ended and sees the succeeded parents' results; the default still cancels; a parent retried
after the child left 'waiting' never runs it twice; a bad value is refused naming the field."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from pgwork.db import Queue
from pgwork.db.batches import StoredSuccess
from pgwork.errors import InvalidArgument
from pgwork.models import NewJob
from pgwork.validation import validate
from pgwork.worker.job import Job
from tests.support.ring import ready_is_pending
from tests.support.rows import Rows


def _row(queue: Queue, job_id: int) -> Any:
    row = queue.job(job_id)
    assert row is not None
    return row


def _left(queue: Queue, job_id: int) -> int:
    with psycopg.connect(queue.dsn) as conn:
        row = conn.execute("SELECT parents_left FROM pgwork.jobs WHERE id = %s", (job_id,)).fetchone()
    assert row is not None
    return int(row[0])


def _parents(queue: Queue, job_id: int) -> list[tuple[int, str, Any]]:
    return [(p.parent_id, p.status, p.result) for p in queue.parent_results(job_id)]


def test_a_dead_parent_releases_a_run_child_which_sees_the_other_results(queue: Queue) -> None:
    pages = queue.enqueue_many([NewJob("page", {"p": p}, max_attempts=1) for p in range(3)])
    merge = queue.enqueue("merge", {}, after=pages, on_parent_failure="run")
    strict = queue.enqueue("merge", {"strict": True}, after=pages)  # the default, beside it
    held = {c.id: c for c in queue.claim("w", job_types=["page"], limit=3)}
    queue.succeed(held[pages[0]].lease, {"p": 0})
    queue.fail(held[pages[1]].lease, "unreadable scan")  # its only attempt: dead
    assert _row(queue, merge).status == "waiting"  # page 2 has not ended yet
    assert _row(queue, strict).status == "cancelled"
    assert f"it waits for job {pages[1]} " in _row(queue, strict).last_error
    assert f"[job {pages[1]} (page) it waits for ended dead; it runs anyway]" in _row(queue, merge).last_error
    queue.succeed(held[pages[2]].lease, {"p": 2})
    assert _row(queue, merge).status == "pending"
    assert ready_is_pending(queue.dsn) == 1
    [claimed] = queue.claim("w", job_types=["merge"])
    assert claimed.id == merge
    assert _parents(queue, merge) == [
        (pages[0], "succeeded", {"p": 0}),
        (pages[1], "dead", None),
        (pages[2], "succeeded", {"p": 2}),
    ]
    # What the handler sees: only succeeded parents' results, and the others by status.
    job = Job(claimed.id, "merge", {}, 1, 1, claimed.idempotency_key)
    job.parent_reader = lambda: {p.parent_id: (p.status, p.result) for p in queue.parent_results(merge)}
    assert job.parent_results() == {pages[0]: {"p": 0}, pages[2]: {"p": 2}}
    assert job.failed_parents() == {pages[1]: "dead"}


def test_the_last_parent_dying_releases_the_child_and_wakes_workers(queue: Queue) -> None:
    ok, doomed = Rows(queue, "page").succeeded(result={"p": 0}), Rows(queue, "page").running()
    merge = queue.enqueue("merge", {}, after=[ok, doomed.id], on_parent_failure="run")
    with psycopg.connect(queue.dsn, autocommit=True) as listener:
        listener.execute("LISTEN pgwork_jobs")
        queue.fail(doomed.lease, "fatal", retryable=False)
        woken = [n.payload for n in listener.notifies(timeout=5, stop_after=1)]
    assert woken == ["merge"]
    assert _row(queue, merge).status == "pending"
    assert _parents(queue, merge) == [(ok, "succeeded", {"p": 0}), (doomed.id, "dead", None)]


def test_a_cancelled_parent_counts_as_ended_and_so_does_one_ended_before_the_enqueue(queue: Queue) -> None:
    gone = Rows(queue, "page").dead()
    waiting_on = Rows(queue, "page").pending()
    merge = queue.enqueue("merge", {}, after=[waiting_on, gone], on_parent_failure="run")
    assert _row(queue, merge).status == "waiting" and _left(queue, merge) == 1
    assert queue.cancel([waiting_on]).cancelled == [waiting_on]
    assert _row(queue, merge).status == "pending"
    alone = queue.enqueue("merge", {"n": 2}, after=[gone], on_parent_failure="run")
    assert _row(queue, alone).status == "pending"  # every parent has ended already
    with pytest.raises(InvalidArgument, match="is dead, so this job could never run"):
        queue.enqueue("merge", {"n": 3}, after=[gone])  # the default is still refused


def test_a_retry_after_the_child_ran_does_not_run_it_again(queue: Queue) -> None:
    doomed = Rows(queue, "page").running(max_attempts=1)
    merge = queue.enqueue("merge", {}, after=[doomed.id], on_parent_failure="run")
    report = queue.enqueue("report", {}, after=[merge])  # a default grandchild
    queue.fail(doomed.lease, "fatal", retryable=False)
    [child] = queue.claim("w", job_types=["merge"])
    queue.succeed(child.lease, {"merged": 0})
    assert _row(queue, report).status == "pending"
    assert queue.retry([doomed.id]) == [doomed.id]
    [again] = queue.claim("w", job_types=["page"])
    queue.succeed(again.lease, {"p": 0})
    row = _row(queue, merge)
    assert (row.status, row.attempt_count) == ("succeeded", 1)
    assert queue.claim("w", job_types=["merge", "report"], limit=5)[0].id == report  # the merge is not offered
    assert ready_is_pending(queue.dsn) == 0


def test_a_retry_while_the_child_still_waits_makes_it_wait_for_the_retried_run(queue: Queue) -> None:
    doomed, other = Rows(queue, "page").running(max_attempts=1), Rows(queue, "other").running()
    merge = queue.enqueue("merge", {}, after=[doomed.id, other.id], on_parent_failure="run")
    queue.fail(doomed.lease, "fatal", retryable=False)
    assert _left(queue, merge) == 1
    queue.retry([doomed.id])
    assert _left(queue, merge) == 2
    queue.succeed(other.lease, {"p": 1})
    assert _row(queue, merge).status == "waiting"
    [again] = queue.claim("w", job_types=["page"])
    queue.succeed(again.lease, {"p": 0})
    assert _row(queue, merge).status == "pending"
    assert [s for _, s, _ in _parents(queue, merge)] == ["succeeded", "succeeded"]


def test_a_follow_up_may_run_after_a_failed_sibling(queue: Queue) -> None:
    held = Rows(queue, "split").running()
    followups = (
        NewJob("page", {"p": 0}, key="page-0", max_attempts=1),
        NewJob("merge", {}, key="merge", after=["page-0"], on_parent_failure="run"),
    )
    queue.finish_many([StoredSuccess(held.lease, "{}", tuple(validate(f) for f in followups))], [])
    [page] = queue.claim("w", job_types=["page"])
    queue.fail(page.lease, "fatal", retryable=False)
    [merge] = queue.claim("w", job_types=["merge"])
    assert _parents(queue, merge.id) == [(page.id, "dead", None)]


@pytest.mark.parametrize("policy", ["skip", "RUN", None, True, ["run"]])
def test_a_bad_policy_is_refused_naming_the_field(queue: Queue, policy: object) -> None:
    parent = Rows(queue, "page").pending()
    calls = [
        lambda: queue.enqueue("merge", {}, after=[parent], on_parent_failure=policy),  # type: ignore[arg-type]
        lambda: queue.enqueue_many([NewJob("merge", {}, after=[parent], on_parent_failure=policy)]),  # type: ignore[arg-type]
    ]
    for call in calls:
        with pytest.raises(InvalidArgument) as caught:
            call()
        assert caught.value.field == "on_parent_failure" and "must be 'cancel' or 'run'" in str(caught.value)
    assert queue.job(parent) is not None and _row(queue, parent).status == "pending"
    with psycopg.connect(queue.dsn) as conn:
        row = conn.execute("SELECT count(*) FROM pgwork.jobs WHERE job_type = 'merge'").fetchone()
    assert row == (0,)
