"""Producing and asking, the same behaviour through Queue (sync) and AsyncQueue (asyncio):
enqueue (alone, in the caller's transaction, refused with the same error), job, result, cancel,
wait; the outcome function's grants; and a database at the previous version migrating forward."""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
from psycopg import sql
from psycopg_pool import AsyncConnectionPool

from pgwork import AsyncQueue, JobFailed, Queue, WaitTimeout
from pgwork.db import migrate
from pgwork.errors import InvalidArgument, NotMigrated
from pgwork.models import Completion, NewJob
from pgwork.sql_files import migrations
from tests.support.db import V1_JOBS, MakeRole, by_key, snapshot
from tests.support.producers import Producer
from tests.support.rows import Rows
from tests.support.waiters import waiter_has_read
from tests.support.waiting import wait_for


@pytest.fixture(params=["sync", "async"])
def producer(request: pytest.FixtureRequest, dsn: str) -> Iterator[Producer]:
    p = Producer(request.param, dsn)
    yield p
    p.close()


def test_enqueue_job_and_result_read_the_same(producer: Producer, queue: Queue) -> None:
    job_id = producer.call("enqueue", "ocr", {"doc": 7}, key="doc-7", priority=3, max_attempts=2)
    row = producer.call("job", job_id)
    assert (row.job_type, row.payload, row.idempotency_key, row.priority, row.max_attempts, row.status) == (
        "ocr",
        {"doc": 7},
        "doc-7",
        3,
        2,
        "pending",
    )
    [claimed] = queue.claim("w", job_types=["ocr"])
    assert queue.succeed(claimed.lease, {"pages": 3}) is Completion.CREATED
    assert producer.call("result", "doc-7").result == {"pages": 3}
    assert producer.call("job", job_id + 100) is None
    ids = producer.call("enqueue_many", [NewJob("a", {"n": 1}), NewJob("b", {"n": 2})])
    assert [producer.call("job", i).job_type for i in ids] == ["a", "b"]


def test_enqueue_keys_the_same_work_alike(dsn: str) -> None:
    with Queue(dsn) as q:
        sync_key = q.job(q.enqueue("ocr", {"doc": 1, "lang": "en"})).idempotency_key  # type: ignore[union-attr]

    async def run() -> str:
        async with await AsyncQueue.open(dsn) as aq:
            row = await aq.job(await aq.enqueue("ocr", {"lang": "en", "doc": 1}))
            assert row is not None
            return row.idempotency_key

    assert asyncio.run(run()) == sync_key


@pytest.mark.parametrize("commit", [True, False])
def test_enqueue_inside_the_callers_transaction(producer: Producer, commit: bool) -> None:
    job_id = producer.enqueue_in_transaction(commit, "in-tx")
    assert (producer.call("job", job_id) is not None) is commit


@pytest.mark.parametrize(
    ("args", "kwargs", "field"),
    [
        (("",), {}, "job_type"),
        (("ocr", {"x": float("nan")}), {}, "payload"),
        (("ocr", {}), {"priority": -1}, "priority"),
        (("ocr", {}), {"max_attempts": 0}, "max_attempts"),
    ],
)
def test_bad_input_is_refused_alike_and_writes_nothing(
    producer: Producer, queue: Queue, args: tuple[Any, ...], kwargs: dict[str, Any], field: str
) -> None:
    with pytest.raises(InvalidArgument, match=rf"^{field}: "):
        producer.call("enqueue", *args, **kwargs)
    assert queue.stats() == []


def test_cancel_reports_alike(producer: Producer, queue: Queue) -> None:
    running, done = Rows(queue, "c-run").running().id, Rows(queue, "c-done").succeeded()
    pending = Rows(queue, "c-wait").pending()
    report = producer.call("cancel", [done, running, pending, pending])
    assert (report.cancelled, report.requested, report.not_cancellable) == ([pending], [running], [done])


def test_wait_returns_raises_and_times_out_alike(producer: Producer, queue: Queue) -> None:
    ok = Rows(queue, "w-ok").succeeded({"fine": True})
    assert producer.call("wait", ok, timeout=5) == {"fine": True}
    dead = Rows(queue, "w-dead").dead(error="gave up\nat line 3")
    with pytest.raises(JobFailed, match=rf"job {dead} is dead after \d+ attempt\(s\): gave up$"):
        producer.call("wait", dead, timeout=5)
    pending = Rows(queue, "w-pending").pending()
    with pytest.raises(WaitTimeout, match=rf"job {pending} is still pending"):
        producer.call("wait", pending, timeout=0.2, poll=0.05)


def test_wait_is_woken_by_the_completion(producer: Producer, queue: Queue) -> None:
    job_id = queue.enqueue("w", {})
    [claimed] = queue.claim("w1", job_types=["w"])
    # The finisher runs once the waiter listens; with a 30s poll only the NOTIFY ends it in time.
    finisher = threading.Thread(target=_finish_when_waited, args=(producer.dsn, queue, claimed))
    finisher.start()
    assert producer.call("wait", job_id, timeout=15, poll=30) == {"by": "finisher"}
    finisher.join(15)


def _finish_when_waited(dsn: str, queue: Queue, claimed: Any) -> None:
    _when_waiting(dsn, lambda: queue.succeed(claimed.lease, {"by": "finisher"}))


def test_async_queue_over_the_programs_own_pool(dsn: str, queue: Queue) -> None:
    async def run() -> int:
        async with AsyncConnectionPool(dsn, kwargs={"autocommit": True}, open=False) as pool:
            aq = AsyncQueue(pool)
            job_id = await aq.enqueue("own-pool", {"n": 1})
            await aq.close()  # not its pool: still open
            assert (await aq.job(job_id)) is not None
            return job_id

    job_id = asyncio.run(run())
    assert queue.job(job_id) is not None
    with pytest.raises(InvalidArgument, match=r"^pool: "):
        AsyncQueue("postgresql://x")  # type: ignore[arg-type]


def test_async_queue_refuses_an_unmigrated_database(empty_dsn: str) -> None:
    with pytest.raises(NotMigrated, match="run `pgwork migrate`"):
        asyncio.run(AsyncQueue.open(empty_dsn))


# -- who may wait -----------------------------------------------------------------------------


def test_a_producer_waits_for_results_and_a_reader_only_for_the_end(
    dsn: str, queue: Queue, make_role: MakeRole
) -> None:
    ok = Rows(queue, "g-ok").succeeded({"secret": "result"})
    dead = Rows(queue, "g-dead").dead(error="gave up")
    producer_dsn, reader_dsn = make_role("producer"), make_role("reader")
    with Queue(producer_dsn) as q:
        assert q.wait(ok, timeout=5) == {"secret": "result"}
    with Queue(reader_dsn) as q:
        assert q.wait(ok, timeout=5, result=False) is None
        with pytest.raises(JobFailed, match="gave up"):
            q.wait(dead, timeout=5, result=False)
        with pytest.raises(InvalidArgument, match=r"^result: role .* may not read job results .*result=False"):
            q.wait(ok, timeout=5)
    # The reader's own function carries no result, and the reader cannot reach the producer's.
    with psycopg.connect(reader_dsn) as conn:
        cur = conn.execute("SELECT * FROM pgwork.job_status(%s)", (ok,))
        assert [c.name for c in cur.description or []] == ["id", "status", "attempt_count", "last_error"]
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("SELECT * FROM pgwork.job_outcome(%s)", (ok,))
    # Neither can fire the completion trigger's function by hand.
    for role_dsn in (producer_dsn, reader_dsn):
        with psycopg.connect(role_dsn) as conn, pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("SELECT pgwork.notify_finished()")


def test_async_reader_waits_for_the_end(dsn: str, queue: Queue, make_role: MakeRole) -> None:
    ok = Rows(queue, "ga").succeeded({"secret": "result"})
    reader_dsn = make_role("reader")

    async def run() -> object:
        async with await AsyncQueue.open(reader_dsn) as aq:
            with pytest.raises(InvalidArgument, match=r"^result: "):
                await aq.wait(ok, timeout=5)
            return await aq.wait(ok, timeout=5, result=False)

    assert asyncio.run(run()) is None


# -- migrating forward ------------------------------------------------------------------------


def _at_version_before_wait(dsn: str) -> int:
    """Apply every migration before the one that adds job_outcome (found by name, so the
    lead may renumber it); returns that migration's version."""
    from pgwork import sql_files

    target = next(m for m in migrations() if m.name == "wait_for_outcome")
    with psycopg.connect(dsn) as conn:
        conn.execute(sql_files.query("migrate_bootstrap"))
        for m in migrations():
            if m.version >= target.version:
                break
            conn.execute(m.sql)
            conn.execute(sql_files.query("migrate_record"), {"version": m.version, "name": m.name})
    return target.version


def test_previous_version_with_jobs_in_every_state_migrates_and_its_producers_can_wait(empty_dsn: str) -> None:
    version = _at_version_before_wait(empty_dsn)
    role = f"pgwork_prev_producer_{uuid.uuid4().hex[:8]}"
    reader = f"pgwork_prev_reader_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(empty_dsn) as conn:
        conn.execute(V1_JOBS)
        for name, profile in ((role, "producer"), (reader, "reader")):
            conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(name)))
            conn.execute("SELECT pgwork.grant_profiles(%s, ARRAY[%s])", (name, profile))
    try:
        before = snapshot(empty_dsn)
        ids = by_key(empty_dsn)
        assert migrate(empty_dsn)[0] == version
        assert snapshot(empty_dsn) == before  # every row, every column
        as_producer = psycopg.conninfo.make_conninfo(empty_dsn, user=role)
        from pgwork.db.wait import wait_for_job

        assert wait_for_job(as_producer, ids["succeeded"], timeout=5) == {"ok": True}
        with pytest.raises(JobFailed, match="gave up"):
            wait_for_job(as_producer, ids["dead"], timeout=5)
        with pytest.raises(JobFailed, match="is cancelled"):
            wait_for_job(as_producer, ids["cancelled"], timeout=5)
        as_reader = psycopg.conninfo.make_conninfo(empty_dsn, user=reader)
        assert wait_for_job(as_reader, ids["succeeded"], timeout=5, result=False) is None
        # The lease held across the upgrade finishes, and its waiter is told.
        with Queue(empty_dsn) as q:
            held = next(j for j in q.claim("new", limit=10) if j.id == ids["ready"])
            waited: list[Any] = []
            waiter = threading.Thread(
                target=lambda: waited.append(wait_for_job(as_producer, held.id, timeout=15, poll=30))
            )
            waiter.start()
            _when_waiting(empty_dsn, lambda: q.succeed(held.lease, {"after": "upgrade"}))
            waiter.join(15)
        assert waited == [{"after": "upgrade"}]
    finally:
        with psycopg.connect(empty_dsn, autocommit=True) as conn:
            for name in (role, reader):
                conn.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(name)))
                conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(name)))


def _when_waiting(dsn: str, then: Callable[[], object]) -> None:
    wait_for(lambda: waiter_has_read(dsn), what="the waiter's first read")
    then()
