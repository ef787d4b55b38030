"""Schedules on the real PostgreSQL (migration 0016): each tick enqueued once whatever the number
of schedulers or restarts, missed ticks by policy, the tick in the job's key. Times are passed."""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime, timedelta

import psycopg
import pytest

from pgwork.db import Queue
from pgwork.schedule import Schedule, job_key
from tests.support.cli import pgwork
from tests.support.db import MakeRole

T0 = datetime(2026, 1, 5, 9, 0, 30, tzinfo=UTC)
EVERY_10 = Schedule("cleanup", "*/10 * * * *", "cleanup", {"days": 7})


def keys(queue: Queue) -> list[str]:
    with psycopg.connect(queue.dsn) as conn:
        rows = conn.execute("SELECT idempotency_key FROM pgwork.jobs ORDER BY available_at").fetchall()
    return [r[0] for r in rows]


def test_first_sight_then_each_tick_once(queue: Queue) -> None:
    assert queue.fire_schedule(EVERY_10, now=T0).enqueued == ()  # a schedule starts when first seen
    fired = queue.fire_schedule(EVERY_10, now=T0 + timedelta(minutes=10))
    assert [t for t, _ in fired.enqueued] == [datetime(2026, 1, 5, 9, 10, tzinfo=UTC)]
    # The same instant again, and a scheduler whose clock runs behind: nothing more.
    assert queue.fire_schedule(EVERY_10, now=T0 + timedelta(minutes=10)).enqueued == ()
    assert queue.fire_schedule(EVERY_10, now=T0 + timedelta(minutes=5)).enqueued == ()
    assert keys(queue) == ["schedule:cleanup:2026-01-05T09:10:00Z"]
    job = queue.job(fired.enqueued[0][1])
    assert (
        job is not None
        and job.payload == {"days": 7}
        and job.idempotency_key == job_key("cleanup", fired.enqueued[0][0])
    )
    (row,) = queue.schedules()
    assert (row.last_tick, row.last_job_id) == fired.enqueued[0]
    assert row.next_tick == datetime(2026, 1, 5, 9, 20, tzinfo=UTC)


@pytest.mark.parametrize(
    ("missed", "expected", "skipped"), [("skip", [], 3), ("catchUp", ["09:10", "09:20", "09:30"], 0)]
)
def test_down_across_three_ticks(queue: Queue, missed: str, expected: list[str], skipped: int) -> None:
    schedule = Schedule("report", "*/10 * * * *", "report", missed=missed)
    queue.fire_schedule(schedule, now=T0 + timedelta(minutes=5))  # seen at 09:05:30, then down
    fired = queue.fire_schedule(schedule, now=T0 + timedelta(minutes=35))  # back at 09:35:30
    assert [t.strftime("%H:%M") for t, _ in fired.enqueued] == expected
    assert fired.skipped == skipped
    # And from there on, every tick as it comes.
    after = queue.fire_schedule(schedule, now=T0 + timedelta(minutes=40))
    assert [t.strftime("%H:%M") for t, _ in after.enqueued] == ["09:40"]
    assert queue.schedules()[0].skipped_ticks == skipped


def test_many_schedulers_at_once_enqueue_each_tick_once(queue: Queue) -> None:
    """Eight schedulers (their own pools, as eight operators or workers) fire the same schedule at
    the same instants, over and over: one job per tick."""
    schedule = Schedule("race", "* * * * *", "race", missed="catchUp")
    queue.fire_schedule(schedule, now=T0)
    queues = [Queue(queue.dsn, pool_size=1) for _ in range(8)]
    start = threading.Barrier(len(queues))

    def scheduler(q: Queue) -> None:
        start.wait()
        for minute in range(1, 6):
            q.fire_schedule(schedule, now=T0 + timedelta(minutes=minute))

    threads = [threading.Thread(target=scheduler, args=(q,)) for q in queues]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for q in queues:
        q.close()
    assert keys(queue) == [f"schedule:race:2026-01-05T09:{m:02d}:00Z" for m in range(1, 6)]


def test_a_stale_watermark_still_meets_the_unique_key(queue: Queue) -> None:
    """Even a scheduler that would decide an old tick again (here: the watermark moved back by
    hand) enqueues nothing twice: the tick's key is taken."""
    queue.fire_schedule(EVERY_10, now=T0)
    queue.fire_schedule(EVERY_10, now=T0 + timedelta(minutes=10))
    with psycopg.connect(queue.dsn) as conn:
        conn.execute("UPDATE pgwork.schedules SET watermark = %s", (T0,))
    assert queue.fire_schedule(EVERY_10, now=T0 + timedelta(minutes=10)).enqueued == ()
    assert len(keys(queue)) == 1


def test_producer_fires_reader_reads(queue: Queue, make_role: MakeRole) -> None:
    with Queue(make_role("producer")) as producer:
        producer.fire_schedule(EVERY_10, now=T0)
        assert len(producer.fire_schedule(EVERY_10, now=T0 + timedelta(minutes=10)).enqueued) == 1
    with Queue(make_role("reader")) as reader:
        assert [s.name for s in reader.schedules()] == ["cleanup"]
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            reader.fire_schedule(EVERY_10, now=T0 + timedelta(minutes=20))


def test_pgwork_schedules_shows_last_and_next_tick(queue: Queue) -> None:
    queue.fire_schedule(EVERY_10, now=T0)
    queue.fire_schedule(EVERY_10, now=T0 + timedelta(minutes=10))
    out = pgwork("schedules", "--json", dsn=queue.dsn)
    assert out.returncode == 0, out.stderr
    (row,) = json.loads(out.stdout)
    assert (row["name"], row["cron"], row["last_tick"], row["next_tick"]) == (
        "cleanup", "*/10 * * * *", "2026-01-05 09:10:00+00:00", "2026-01-05 09:20:00+00:00"
    )  # fmt: skip
    assert "cleanup" in pgwork("schedules", dsn=queue.dsn).stdout
