"""The reaper service (pgwork/reaper.py): its config, one round, the loop, surviving a bad round.

Rounds pass `now` instead of waiting for a lease to lapse, as River's rescuer tests do.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import psycopg
import pytest

from pgwork.db import Queue
from pgwork.errors import InvalidArgument, Unreachable
from pgwork.models import Reclaimed
from pgwork.reaper import Reaper, ReaperConfig, another_round_fits
from tests.support.waiting import CONDITION_TIMEOUT, stays, wait_for


@pytest.mark.parametrize(
    ("now", "every", "deadline", "fits"),
    [
        (0.0, 10.0, None, True),  # no end: always another round
        (0.0, 10.0, 0.0, False),  # loop_for 0: the one round was all
        (0.0, 10.0, 50.0, True),
        (40.0, 10.0, 50.0, True),  # starts exactly at the end: still inside the run
        (40.1, 10.0, 50.0, False),
        (49.0, 0.5, 50.0, True),
    ],
)
def test_another_round_fits(now: float, every: float, deadline: float | None, fits: bool) -> None:
    assert another_round_fits(now, every, deadline) is fits


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"every": 0.0}, "every"),
        ({"every": -1.0}, "every"),
        ({"every": float("nan")}, "every"),
        ({"limit": 0}, "limit"),
        ({"limit": 1_000_001}, "limit"),
        ({"loop_for": -1.0}, "loop_for"),
        ({"loop_for": float("nan")}, "loop_for"),
    ],
)
def test_a_bad_config_names_its_field(kwargs: dict[str, float], field: str) -> None:
    with pytest.raises(InvalidArgument) as caught:
        ReaperConfig(**kwargs)  # type: ignore[arg-type]
    assert caught.value.field == field
    assert str(caught.value).startswith(f"{field}: ")


def _lapsed(queue: Queue, n: int = 1) -> datetime:
    """Claim `n` jobs with a 1 s lease; returns a `now` at which every lease has lapsed."""
    for i in range(n):
        queue.enqueue("t", {"i": i})
    assert len(queue.claim("gone", limit=n, lease=1.0)) == n
    return datetime.now(UTC) + timedelta(seconds=5)


def test_run_once_returns_lapsed_leases_and_reports_each(queue: Queue) -> None:
    later = _lapsed(queue, 2)
    seen: list[Reclaimed] = []
    with Reaper(lambda: Queue(queue.dsn, pool_size=1), on_reclaimed=seen.append) as reaper:
        assert reaper.run_once(now=datetime.now(UTC)) == []  # leases still live
        found = reaper.run_once(now=later)
    assert sorted(r.id for r in found) == sorted(r.id for r in seen) and len(found) == 2
    assert {(r.previous_owner, r.attempt_count, r.status) for r in found} == {("gone", 1, "pending")}
    assert (reaper.rounds, reaper.reclaimed, reaper.errors) == (2, 2, 0)


def test_run_once_honours_the_limit(queue: Queue) -> None:
    later = _lapsed(queue, 3)
    with Reaper(lambda: Queue(queue.dsn, pool_size=1), ReaperConfig(limit=2)) as reaper:
        assert len(reaper.run_once(now=later)) == 2
        assert len(reaper.run_once(now=later)) == 1


def test_loop_for_zero_is_one_round(queue: Queue) -> None:
    _lapsed(queue)
    with Reaper(lambda: Queue(queue.dsn, pool_size=1), ReaperConfig(every=60.0, loop_for=0.0)) as reaper:
        reaper.loop()  # would block a minute if it went round again
    assert reaper.rounds == 1


def test_loop_until_stopped_ends_on_the_event(queue: Queue) -> None:
    stop = threading.Event()
    reaper = Reaper(lambda: Queue(queue.dsn, pool_size=1), ReaperConfig(every=0.01, loop_for=None))
    thread = threading.Thread(target=reaper.loop, args=(stop,))
    thread.start()
    try:
        wait_for(lambda: reaper.rounds >= 3, what="three rounds")
    finally:
        stop.set()
        thread.join(timeout=CONDITION_TIMEOUT)  # the loop ends before the queue is closed under it
        reaper.close()
    assert not thread.is_alive()


def test_with_on_error_a_failed_round_is_counted_and_the_next_reconnects(queue: Queue) -> None:
    attempts: list[int] = []
    errors: list[Exception] = []

    def connect() -> Queue:
        attempts.append(1)
        if len(attempts) == 1:
            raise Unreachable("database down (simulated)")
        return Queue(queue.dsn, pool_size=1)

    stop = threading.Event()
    reaper = Reaper(connect, ReaperConfig(every=0.01, loop_for=None), on_error=errors.append)

    thread = threading.Thread(target=reaper.loop, args=(stop,))
    thread.start()
    try:
        wait_for(lambda: reaper.rounds >= 2, what="a round after the failed one")
    finally:
        stop.set()
        thread.join(timeout=CONDITION_TIMEOUT)  # the loop ends before the queue is closed under it
        reaper.close()
    assert not thread.is_alive()
    assert reaper.errors == 1 and [str(e) for e in errors] == ["database down (simulated)"]
    assert reaper.rounds >= 2 and len(attempts) == 2  # reconnected once, then kept its queue


def test_without_on_error_a_failed_round_propagates() -> None:
    def connect() -> Queue:
        raise Unreachable("database down (simulated)")

    with pytest.raises(Unreachable), Reaper(connect, ReaperConfig(loop_for=0.0)) as reaper:
        reaper.loop()
    assert reaper.rounds == 0


def test_close_waits_for_the_round_in_flight_and_stops_the_loop(queue: Queue) -> None:
    """The tools stop a looping reaper from another thread and close it after a bounded join: a
    round still running then (a loaded machine) must not have its connection closed under it."""
    later = _lapsed(queue)
    inside, release = threading.Event(), threading.Event()

    def held(_: Reclaimed) -> None:
        inside.set()
        release.wait(CONDITION_TIMEOUT)

    reaper = Reaper(lambda: Queue(queue.dsn, pool_size=1), ReaperConfig(loop_for=None), on_reclaimed=held)
    found: list[list[Reclaimed]] = []
    rounds = threading.Thread(target=lambda: found.append(reaper.run_once(now=later)))
    rounds.start()
    assert inside.wait(CONDITION_TIMEOUT), "the round reached its callback"
    closer = threading.Thread(target=reaper.close)
    closer.start()
    stays(closer.is_alive, duration=0.3, what="close() waiting for the round")
    release.set()
    rounds.join(CONDITION_TIMEOUT)
    closer.join(CONDITION_TIMEOUT)
    assert not rounds.is_alive() and not closer.is_alive()
    assert [len(f) for f in found] == [1]
    reaper.loop()  # closed: no round runs, no queue is reopened
    assert reaper.rounds == 1


def test_a_reaper_round_rotates_the_ready_ring(queue: Queue) -> None:
    job_id = queue.enqueue("t", {})
    later = datetime.now(UTC) + timedelta(seconds=30)  # three 10 s segments on: the job's is old
    with Reaper(lambda: Queue(queue.dsn, pool_size=1)) as reaper:
        reaper.run_once(now=later)
    with psycopg.connect(queue.dsn) as conn:
        [(segment, current)] = conn.execute(
            "SELECT segment, pgwork.ready_segment(%s) FROM pgwork.ready WHERE job_id = %s", [later, job_id]
        ).fetchall()
    assert segment == current
