"""Uniqueness at enqueue (migration 16): a unique job whose key already has a pending, running or
succeeded unique job (or a result) adds nothing and answers that job's id; enforced by a unique
index, so two producers racing make one job."""

from __future__ import annotations

import asyncio
import json
import threading
from datetime import timedelta
from pathlib import Path

import psycopg
import pytest

from pgwork import AsyncQueue, Queue
from pgwork.errors import InvalidArgument
from pgwork.models import Enqueued, NewJob
from tests.support.cli import pgwork
from tests.support.db import MakeRole
from tests.support.waiting import wait_for


def _count(dsn: str, key: str) -> int:
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT count(*) FROM pgwork.jobs WHERE idempotency_key = %s", (key,)).fetchone()
    assert row is not None
    return int(row[0])


def test_a_unique_job_is_added_once_and_the_default_is_unchanged(queue: Queue) -> None:
    first = queue.enqueue("ocr", {"doc": 1}, key="doc-1", unique=True)
    assert queue.enqueue("ocr", {"doc": 1}, key="doc-1", unique=True) == first
    assert queue.enqueue_outcomes([NewJob("ocr", {"doc": 1}, key="doc-1", unique=True)]) == [
        Enqueued(first, False, "pending")
    ]
    # Without unique nothing is checked, and a plain job never blocks a unique one.
    plain = queue.enqueue("ocr", {"doc": 1}, key="doc-1")
    assert plain != first
    assert _count(queue.dsn, "doc-1") == 2
    other = queue.enqueue("ocr", {}, key="plain-first")
    assert queue.enqueue("ocr", {}, key="plain-first", unique=True) != other


def test_states_covered(queue: Queue) -> None:
    """pending, running, succeeded block (succeeded even once retention pruned the row: its
    result remains); dead and cancelled do not: that is how a unique job is tried again."""
    job = queue.enqueue("ocr", {}, key="k", unique=True)
    [claimed] = queue.claim("pod-a")
    assert queue.enqueue_outcomes([NewJob("ocr", key="k", unique=True)]) == [Enqueued(job, False, "running")]
    queue.fail(claimed.lease, "bad scan", retryable=False)
    again = queue.enqueue("ocr", {}, key="k", unique=True)
    assert again != job
    [claimed] = queue.claim("pod-a")
    queue.succeed(claimed.lease, {"ok": True})
    assert queue.enqueue_outcomes([NewJob("ocr", key="k", unique=True)]) == [Enqueued(again, False, "succeeded")]
    assert queue.prune(timedelta(0)) == 1
    assert queue.enqueue_outcomes([NewJob("ocr", key="k", unique=True)]) == [Enqueued(again, False, "succeeded")]
    pending = queue.enqueue("ocr", {}, key="c", unique=True)
    queue.cancel([pending])
    assert queue.enqueue("ocr", {}, key="c", unique=True) != pending


def test_a_batch_keeps_its_order_and_skips_its_own_repeats(queue: Queue) -> None:
    jobs = [NewJob("ocr", key=k, unique=True) for k in ("a", "b", "a")] + [NewJob("ocr", key="a")]
    found = queue.enqueue_outcomes(jobs)
    assert [e.created for e in found] == [True, True, False, True]
    assert found[2].id == found[0].id and len({e.id for e in found}) == 3
    ids = queue.enqueue_many([NewJob("ocr", key="b", unique=True), NewJob("ocr", key="z")])
    assert ids[0] == found[1].id


def test_two_producers_racing_make_one_job(dsn: str, queue: Queue) -> None:
    """A holds its uncommitted unique job; B's enqueue of the same key waits on the index, then
    answers A's id once A commits. No check-then-insert window: the index decides."""
    with psycopg.connect(dsn) as a:
        mine = queue.enqueue("ocr", {"doc": 9}, unique=True, conn=a)
        answer: list[int] = []
        other = threading.Thread(target=lambda: answer.append(queue.enqueue("ocr", {"doc": 9}, unique=True)))
        other.start()

        def blocked() -> bool:
            row = a.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()"
            ).fetchone()
            return bool(row and row[0] >= 1)

        wait_for(blocked, what="the second enqueue to wait on the first one's row")
        a.commit()
        other.join(timeout=30)
    assert answer == [mine]
    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT count(*) FROM pgwork.jobs").fetchone() == (1,)


def test_the_loser_of_a_rolled_back_race_creates_the_job(dsn: str, queue: Queue) -> None:
    with psycopg.connect(dsn) as a:
        queue.enqueue("ocr", {"doc": 9}, unique=True, conn=a)
        answer: list[int] = []
        other = threading.Thread(target=lambda: answer.append(queue.enqueue("ocr", {"doc": 9}, unique=True)))
        other.start()
        wait_for(
            lambda: (a.execute("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'").fetchone()
                     or (0,))[0],
            what="the second enqueue to wait",
        )  # fmt: skip
        a.rollback()
        other.join(timeout=30)
    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT id FROM pgwork.jobs").fetchall() == [(answer[0],)]


def test_async_queue_and_a_producer_role(dsn: str, make_role: MakeRole) -> None:
    producer = make_role("producer")

    async def run() -> tuple[int, int]:
        q = await AsyncQueue.open(producer)
        try:
            return await q.enqueue("ocr", {}, key="x", unique=True), await q.enqueue("ocr", {}, key="x", unique=True)
        finally:
            await q.close()

    first, second = asyncio.run(run())
    assert first == second and _count(dsn, "x") == 1


def test_bad_and_bulk_unique_are_refused(queue: Queue) -> None:
    with pytest.raises(InvalidArgument, match=r"^unique: must be true or false"):
        queue.enqueue_many([NewJob("ocr", unique="yes")])  # type: ignore[arg-type]
    many = [NewJob("ocr", {"i": i}, unique=True) for i in range(1001)]
    with pytest.raises(InvalidArgument, match=r"^unique: is not supported by the COPY path"):
        queue.enqueue_many(many)
    with pytest.raises(InvalidArgument, match=r"^jobs: 1001 jobs at once"):
        queue.enqueue_outcomes(many)
    with pytest.raises(InvalidArgument, match=r"^unique:"):
        queue.load_jobs([NewJob("ocr", unique=True)])
    with psycopg.connect(queue.dsn) as conn:
        assert conn.execute("SELECT count(*) FROM pgwork.jobs").fetchone() == (0,)


def test_cli_unique_and_jobs_file(dsn: str, tmp_path: Path) -> None:
    first = pgwork("enqueue", "ocr", "--payload", '{"doc": 1}', "--unique", dsn=dsn)
    assert first.returncode == 0, first.stderr
    again = pgwork("enqueue", "ocr", "--payload", '{"doc": 1}', "--unique", dsn=dsn)
    assert again.returncode == 0 and again.stdout == first.stdout
    assert f"its key already has job {first.stdout.strip()} (pending)" in again.stderr
    lines = [{"job_type": "ocr", "payload": {"doc": 1}, "unique": True}, {"job_type": "ocr", "payload": {"doc": 2}}]
    path = tmp_path / "jobs.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    out = pgwork("enqueue", "--from-file", str(path), dsn=dsn)
    assert out.returncode == 0, out.stderr
    assert "enqueued 2 jobs" in out.stdout and "1 unique jobs were there already" in out.stdout
    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT count(*) FROM pgwork.jobs").fetchone() == (2,)
    bad = pgwork("enqueue", "--from-file", str(path), "--unique", dsn=dsn)
    assert bad.returncode == 2 and "--unique: each line of --from-file says its own" in bad.stderr
