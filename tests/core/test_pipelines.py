"""Pipelines against a real database (migration 22): follow-ups written with the finish and only
with it, jobs that wait for parents, fan-in released once by the last parent, a dead parent
cancelling its dependents and a retry reviving them, and the trust rules of the new functions."""

from __future__ import annotations

import asyncio
import json
import threading
from datetime import UTC, datetime, timedelta

import psycopg
import pytest

from pgwork.db import Queue, new_token
from pgwork.db.aqueue import AsyncQueue
from pgwork.db.batches import StoredSuccess
from pgwork.errors import InvalidArgument
from pgwork.models import ClaimedJob, Completion, Lease, NewJob
from pgwork.validation import validate
from tests.support.cli import pgwork
from tests.support.db import MakeRole
from tests.support.rows import Rows

Denied = psycopg.errors.InsufficientPrivilege


def _count(dsn: str, job_type: str, status: str | None = None) -> int:
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pgwork.jobs WHERE job_type = %s AND (%s::text IS NULL OR status::text = %s)",
            (job_type, status, status),
        ).fetchone()
    assert row is not None
    return int(row[0])


def _status(queue: Queue, job_id: int) -> str:
    row = queue.job(job_id)
    assert row is not None
    return row.status


def _success(held: ClaimedJob, *followups: NewJob) -> StoredSuccess:
    return StoredSuccess(held.lease, f'{{"id": {held.id}}}', tuple(validate(f) for f in followups))


def _claim_all(queue: Queue, job_type: str, n: int) -> list[ClaimedJob]:
    claimed = queue.claim("w", job_types=[job_type], limit=n)
    assert len(claimed) == n
    return claimed


def test_followups_exist_exactly_when_the_finish_commits(queue: Queue) -> None:
    held = Rows(queue, "split").running()
    success = _success(held, NewJob("page", {"p": 1}), NewJob("page", {"p": 2}))
    with psycopg.connect(queue.dsn) as conn:
        done, _ = queue.finish_many([success], [], conn=conn)
        assert done == {held.id: Completion.CREATED}
        assert _count(queue.dsn, "page") == 0  # not visible before the commit
        conn.rollback()
    assert _status(queue, held.id) == "running" and _count(queue.dsn, "page") == 0
    done, _ = queue.finish_many([success], [])
    assert done == {held.id: Completion.CREATED}
    assert _status(queue, held.id) == "succeeded" and _count(queue.dsn, "page", "pending") == 2
    # The same finish again: the token no longer holds the job, nothing more is created.
    assert queue.finish_many([success], [])[0] == {held.id: Completion.LEASE_LOST}
    assert _count(queue.dsn, "page") == 2


def test_a_finish_that_lost_its_lease_creates_nothing(queue: Queue) -> None:
    held = Rows(queue, "split").running(lease=1)
    later = datetime.now(UTC) + timedelta(seconds=60)
    assert [r.id for r in queue.reap(now=later)] == [held.id]
    [thief] = queue.claim("thief", job_types=["split"], now=later)
    finished = queue.finish_then_claim([_success(held, NewJob("page", {}))], [], "w", job_types=["none"])
    assert finished.completions == {held.id: Completion.LEASE_LOST}
    forged = Lease(held.id, new_token(), "w", 1)
    assert queue.finish_many([StoredSuccess(forged, "1", (validate(NewJob("page", {})),))], [])[0] == {
        held.id: Completion.LEASE_LOST
    }
    assert _count(queue.dsn, "page") == 0
    assert queue.finish_many([_success(thief, NewJob("page", {}))], [])[0] == {held.id: Completion.CREATED}
    assert _count(queue.dsn, "page") == 1


def test_a_batch_of_finishes_creates_each_jobs_children_once(queue: Queue) -> None:
    for i in range(6):
        queue.enqueue("split", {"doc": i})
    first = {c.payload["doc"]: c for c in _claim_all(queue, "split", 6)}
    later = datetime.now(UTC) + timedelta(days=1)
    queue.reap(now=later)  # every lease lapses; claimed again, new tokens
    by_doc = {c.payload["doc"]: c for c in queue.claim("w", job_types=["split"], limit=6, now=later)}
    successes = [_success(by_doc[d], *(NewJob("page", {"doc": d, "p": p}) for p in range(d + 1))) for d in range(5)]
    successes.append(_success(first[5], NewJob("page", {"doc": 5, "p": 0})))  # a stale token among them
    # Followed by the claim, in one round trip, as the worker writes them.
    finished = queue.finish_then_claim(successes, [], "w", job_types=["page"], limit=100)
    assert finished.completions == {
        **{by_doc[d].id: Completion.CREATED for d in range(5)},
        first[5].id: Completion.LEASE_LOST,
    }
    claimed = finished.claimed or []
    by_parent = sorted((c.payload["doc"], c.payload["p"]) for c in claimed)
    assert by_parent == [(d, p) for d in range(5) for p in range(d + 1)]  # each child once, none for doc 5
    assert _count(queue.dsn, "page") == 15


def test_a_result_already_written_under_the_key_creates_no_second_set(queue: Queue) -> None:
    rows = Rows(queue, "split")
    first = rows.running(key="doc-7")
    second = rows.running(key="doc-7", payload={"again": 1})
    assert queue.finish_many([_success(first, NewJob("page", {"n": 1}))], [])[0] == {first.id: Completion.CREATED}
    done, _ = queue.finish_many([_success(second, NewJob("page", {"n": 2}))], [])
    assert done == {second.id: Completion.ALREADY_EXISTED}
    assert _count(queue.dsn, "page") == 1


def test_waiting_jobs_are_invisible_to_the_claim_until_every_parent_succeeded(queue: Queue) -> None:
    rows = Rows(queue, "page")
    a, b = rows.running(), rows.running()
    merge = queue.enqueue("merge", {"doc": 1}, after=[a.id, b.id])
    assert _status(queue, merge) == "waiting"
    assert queue.claim("w", job_types=["merge"]) == [] and queue.claim("w") == []
    assert queue.waiting() == {"merge": 1}
    queue.succeed(a.lease, {"page": 0})
    assert _status(queue, merge) == "waiting" and queue.claim("w", job_types=["merge"]) == []
    with psycopg.connect(queue.dsn, autocommit=True) as listener:
        listener.execute("LISTEN pgwork_jobs")
        queue.succeed(b.lease, {"page": 1})
        woken = [n.payload for n in listener.notifies(timeout=5, stop_after=1)]
    assert woken == ["merge"]
    [claimed] = queue.claim("w", job_types=["merge"])
    assert claimed.id == merge
    assert [(p.parent_id, p.result) for p in queue.parent_results(merge)] == [(a.id, {"page": 0}), (b.id, {"page": 1})]
    family = queue.job_family(merge)
    assert [(r.relation, r.id, r.status) for r in family] == [
        ("parent", a.id, "succeeded"),
        ("parent", b.id, "succeeded"),
    ]
    assert [(r.relation, r.id) for r in queue.job_family(a.id)] == [("child", merge)]


def test_a_parent_already_succeeded_leaves_the_child_pending(queue: Queue) -> None:
    done = Rows(queue, "page").succeeded(key="p-1", unique=True)
    child = queue.enqueue("merge", {}, after=["p-1", done])  # by key (its stored result) and by id
    assert _status(queue, child) == "pending"


def test_keys_name_earlier_jobs_of_the_same_call(queue: Queue) -> None:
    pages = [NewJob("page", {"p": p}, key=f"doc:{p}") for p in range(3)]
    ids = queue.enqueue_many([*pages, NewJob("merge", {}, after=["doc:0", "doc:1", "doc:2"])])
    assert [_status(queue, i) for i in ids] == ["pending", "pending", "pending", "waiting"]
    assert [r.id for r in queue.job_family(ids[3])] == ids[:3]


@pytest.mark.parametrize(
    ("after", "problem"),
    [
        ([10**12], "there is no job"),
        (["no-such-key"], "names no earlier job"),
        ("12", "must be a list"),
        ([True], "holds True"),
        ([0], "not a job id"),
    ],
)
def test_bad_parents_are_refused_naming_after(queue: Queue, after: object, problem: str) -> None:
    with pytest.raises(InvalidArgument) as caught:
        queue.enqueue("merge", {}, after=after)  # type: ignore[arg-type]
    assert caught.value.field == "after" and problem in str(caught.value)
    assert _count(queue.dsn, "merge") == 0


def test_a_dead_parent_is_refused_and_unique_or_bulk_with_after_too(queue: Queue) -> None:
    dead = Rows(queue, "page").dead()
    with pytest.raises(InvalidArgument, match="is dead, so this job could never run"):
        queue.enqueue("merge", {}, after=[dead])
    with pytest.raises(InvalidArgument, match="cannot be combined with after"):
        queue.enqueue("merge", {}, after=[dead], unique=True)
    with pytest.raises(InvalidArgument, match="COPY path"):
        queue.load_jobs([NewJob("merge", {}, after=[dead])])


def test_fan_out_200_then_fan_in_runs_the_merge_once_after_every_page(queue: Queue) -> None:
    page_ids = queue.enqueue_many([NewJob("page", {"p": p}) for p in range(200)])
    merge = queue.enqueue("merge", {"doc": 1}, after=page_ids)
    held = _claim_all(queue, "page", 200)
    # Four finishers at once, in batches of 10: parents of one child finishing concurrently.
    chunks = [held[i : i + 10] for i in range(0, 200, 10)]
    errors: list[BaseException] = []

    def finish(mine: list[list[ClaimedJob]]) -> None:
        try:
            for chunk in mine:
                queue.finish_many([StoredSuccess(c.lease, f'{{"p": {c.payload["p"]}}}') for c in chunk], [])
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=finish, args=(chunks[i::4],)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors
    row = queue.job(merge)
    assert row is not None and row.status == "pending"
    [claimed] = queue.claim("w", job_types=["merge"])
    results = queue.parent_results(claimed.id)
    assert sorted(r.result["p"] for r in results) == list(range(200))
    assert queue.claim("w", job_types=["merge"]) == []


def test_a_dead_page_cancels_the_merge_naming_it_and_a_retry_revives_it(queue: Queue) -> None:
    pages = queue.enqueue_many([NewJob("page", {"p": p}, max_attempts=1) for p in range(3)])
    merge = queue.enqueue("merge", {}, after=pages)
    report = queue.enqueue("report", {}, after=[merge])  # a grandchild
    held = {c.id: c for c in _claim_all(queue, "page", 3)}
    queue.succeed(held[pages[0]].lease, {"p": 0})
    queue.fail(held[pages[1]].lease, "unreadable scan")  # its only attempt: dead
    for job_id, parent in ((merge, pages[1]), (report, merge)):
        row = queue.job(job_id)
        assert row is not None and row.status == "cancelled"
        assert f"it waits for job {parent} " in (row.last_error or "")
    assert queue.retry([pages[1]]) == [pages[1]]
    assert _status(queue, merge) == "waiting" and _status(queue, report) == "waiting"
    [again] = queue.claim("w", job_types=["page"])
    queue.succeed(again.lease, {"p": 1})
    queue.succeed(held[pages[2]].lease, {"p": 2})
    assert _status(queue, merge) == "pending" and _status(queue, report) == "waiting"


def test_a_retry_keeps_a_child_cancelled_while_another_parent_is_dead(queue: Queue) -> None:
    pages = queue.enqueue_many([NewJob("page", {"p": p}, max_attempts=1) for p in range(2)])
    merge = queue.enqueue("merge", {}, after=pages)
    for c in _claim_all(queue, "page", 2):
        queue.fail(c.lease, "bad page")
    queue.retry([pages[0]])
    row = queue.job(merge)
    assert row is not None and row.status == "cancelled"
    assert f"job {pages[1]} it waits for is still dead" in (row.last_error or "")
    queue.retry([pages[1]])
    assert _status(queue, merge) == "waiting"


def test_a_cancelled_waiting_job_cancels_its_own_dependents(queue: Queue) -> None:
    page = Rows(queue, "page").pending()
    merge = queue.enqueue("merge", {}, after=[page])
    report = queue.enqueue("report", {}, after=[merge])
    assert queue.cancel([merge]).cancelled == [merge]
    assert _status(queue, report) == "cancelled"


def test_trust_rules_of_the_pipeline_functions(dsn: str, make_role: MakeRole) -> None:
    reader, producer, worker = make_role("reader"), make_role("producer"), make_role("worker")
    with Queue(dsn) as owner:
        parent = Rows(owner, "page").succeeded(result={"secret": "s3cr3t"})
        held = Rows(owner, "split").running()
    with Queue(producer) as q:
        child = q.enqueue("merge", {}, after=[parent])
        assert [r.result for r in q.parent_results(child)] == [{"secret": "s3cr3t"}]
        with pytest.raises(Denied):  # a producer cannot finish, so cannot create follow-ups either
            q.finish_many([_success(held, NewJob("page", {}))], [])
    with Queue(reader) as q:
        assert [(r.relation, r.id) for r in q.job_family(child)] == [("parent", parent)]
        assert q.waiting() == {}
        for call in (lambda: q.parent_results(child), lambda: q.enqueue("merge", {}, after=[parent])):
            with pytest.raises(Denied):
                call()
    with Queue(worker) as q:
        done, _ = q.finish_many([_success(held, NewJob("page", {"from": "worker"}))], [])
        assert done == {held.id: Completion.CREATED}
    for role in (reader, producer, worker):
        with psycopg.connect(role) as conn, pytest.raises(Denied):
            conn.execute("SELECT * FROM pgwork.job_edges")
    for role in (reader, producer):
        with psycopg.connect(role) as conn, pytest.raises(Denied):
            conn.execute("SELECT pgwork.release_children(ARRAY[1]::bigint[], now())")


def test_job_show_lists_parents_and_children(queue: Queue, make_role: MakeRole) -> None:
    pages = queue.enqueue_many([NewJob("page", {"p": p}, max_attempts=1) for p in range(2)])
    merge = queue.enqueue("merge", {}, after=pages)
    [held, _] = _claim_all(queue, "page", 2)
    queue.fail(held.lease, "unreadable")
    reader = make_role("reader")
    out = pgwork("job", "show", str(merge), dsn=reader)
    assert out.returncode == 0, out.stderr
    assert f"parents     {pages[0]} page dead, {pages[1]} page running" in out.stdout
    assert "merge  cancelled" in out.stdout
    shown = json.loads(pgwork("job", "show", str(pages[1]), "--json", dsn=reader).stdout)
    assert [(c["id"], c["status"], c["blocked_by"]) for c in shown["children"]] == [(merge, "cancelled", pages[0])]
    assert shown["parents"] == []


def test_async_queue_enqueues_after_parents_too(queue: Queue) -> None:
    parent = Rows(queue, "page").pending()

    async def run() -> tuple[int, str]:
        async with await AsyncQueue.open(queue.dsn) as aq:
            child = await aq.enqueue("merge", {}, after=[parent])
            with pytest.raises(InvalidArgument, match="there is no job"):
                await aq.enqueue("merge", {"n": 2}, after=[10**12])
            return child, _status(queue, child)

    child, status = asyncio.run(run())
    assert status == "waiting" and [r.id for r in queue.job_family(child)] == [parent]


def test_pgwork_stats_notes_waiting_jobs_apart_from_the_backlog(queue: Queue) -> None:
    parent = Rows(queue, "page").pending()
    queue.enqueue_many([NewJob("merge", {"n": n}, after=[parent]) for n in range(3)])
    out = pgwork("stats", "--json", dsn=queue.dsn)
    assert out.returncode == 0, out.stderr
    assert {s["job_type"]: s["ready"] for s in json.loads(out.stdout)} == {"page": 1}
    assert "waiting for their parents (not in the backlog until those succeed): merge 3" in out.stderr
