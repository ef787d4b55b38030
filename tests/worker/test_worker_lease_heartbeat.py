"""The heartbeat thread on a worker lease (migration 0015), against a real database: it
registers before the first claim, renews the jobs its lease covers (after adopting each once)
with one row, and registers again when its registration is taken over or lost, losing no job
meanwhile."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator

import psycopg
import pytest

from pgwork.db import Queue
from pgwork.models import ClaimedJob
from pgwork.worker.attempt import Attempt, AttemptState
from pgwork.worker.heartbeat import Heartbeat, seconds_to_rotation
from pgwork.worker.holdings import Holdings
from pgwork.worker.job import Job
from pgwork.worker.metrics import WorkerMetrics

OWNER = "pod-lease"


def _hold(holdings: Holdings, claimed: ClaimedJob) -> Job:
    job = Job(claimed.id, claimed.job_type, {}, claimed.attempt, claimed.max_attempts, claimed.idempotency_key)
    held = Attempt(claimed, job, 30)
    held.state = AttemptState.RUNNING
    holdings.add(held)
    return job


def _rows(dsn: str) -> dict[int, tuple[object, object]]:
    """Each running job's row version (xmin) and own lease expiry."""
    with psycopg.connect(dsn) as conn:
        rows = conn.execute("SELECT id, xmin::text, lease_expires_at FROM pgwork.jobs WHERE status = 'running'")
        return {r[0]: (r[1], r[2]) for r in rows}


def _secret(dsn: str) -> uuid.UUID | None:
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT secret FROM pgwork.worker_leases WHERE owner = %s", (OWNER,)).fetchone()
    return None if row is None else row[0]


@pytest.fixture
def heartbeat(queue: Queue) -> Iterator[tuple[Heartbeat, Holdings]]:
    holdings = Holdings()
    beat = Heartbeat(queue, holdings, WorkerMetrics(), interval=1, lease=30, owner=OWNER)
    yield beat, holdings
    beat._close()


def test_covered_jobs_are_renewed_by_the_workers_row_alone(queue: Queue, heartbeat: tuple[Heartbeat, Holdings]) -> None:
    beat, holdings = heartbeat
    assert beat.register() and _secret(queue.dsn) is not None
    for i in range(5):
        queue.enqueue("noop", {"i": i})
    jobs = [_hold(holdings, c) for c in queue.claim(OWNER, job_types=["noop"], limit=5)]
    claimed = _rows(queue.dsn)
    beat.beat()  # the first round adopts each job: its row renewed once
    adopted = _rows(queue.dsn)
    assert all(adopted[i][0] != claimed[i][0] for i in claimed)
    beat.beat()
    beat.beat()
    assert _rows(queue.dsn) == adopted  # then not one job row written
    assert beat.rounds == 3 and not any(j.should_stop for j in jobs)
    with psycopg.connect(queue.dsn) as conn:
        [(age,)] = conn.execute(
            "SELECT extract(epoch FROM now() - heartbeat_at) FROM pgwork.worker_leases WHERE owner = %s", (OWNER,)
        ).fetchall()
    assert float(age) < 5


def test_a_taken_over_registration_is_registered_again_and_no_job_is_lost(
    queue: Queue, heartbeat: tuple[Heartbeat, Holdings], caplog: pytest.LogCaptureFixture
) -> None:
    beat, holdings = heartbeat
    beat.register()
    for i in range(3):
        queue.enqueue("noop", {"i": i})
    jobs = [_hold(holdings, c) for c in queue.claim(OWNER, job_types=["noop"], limit=3)]
    mine = _secret(queue.dsn)
    queue.register_worker(OWNER)  # another process under the same name
    before = _rows(queue.dsn)
    with caplog.at_level(logging.INFO, logger="pgwork.worker.heartbeat"):
        beat.beat()
    assert "registering again" in caplog.text
    assert str(mine) not in caplog.text  # the secret is never logged
    assert _secret(queue.dsn) not in (None, mine)
    after = _rows(queue.dsn)
    # Claimed before the new registration: each renewed by its own row, none lost.
    assert all(after[i][1] > before[i][1] for i in before)  # type: ignore[operator]
    assert not any(j.should_stop for j in jobs)
    beat.beat()
    assert not any(j.should_stop for j in jobs)


def test_a_lost_registration_is_registered_again_after_the_database_was_unreachable(
    queue: Queue, heartbeat: tuple[Heartbeat, Holdings], monkeypatch: pytest.MonkeyPatch
) -> None:
    beat, holdings = heartbeat
    beat.register()
    queue.enqueue("noop", {})
    [job] = [_hold(holdings, c) for c in queue.claim(OWNER, job_types=["noop"])]
    renew = queue.renew

    def unreachable(*args: object, **kwargs: object) -> None:
        raise psycopg.OperationalError("connection refused")

    monkeypatch.setattr(queue, "renew", unreachable)
    beat.beat()  # a failed round: nothing renewed, the job still ours by our own clock
    assert not job.should_stop and beat.rounds == 0
    monkeypatch.setattr(queue, "renew", renew)
    with psycopg.connect(queue.dsn, autocommit=True) as conn:
        # Meanwhile the reaper deleted the worker's row (expired, as the reaper saw it).
        conn.execute("DELETE FROM pgwork.worker_leases WHERE owner = %s", (OWNER,))
    beat.beat()
    assert _secret(queue.dsn) is not None and beat.registered
    assert not job.should_stop and beat.rounds == 1


def test_a_worker_without_the_privilege_renews_row_by_row(queue: Queue, monkeypatch: pytest.MonkeyPatch) -> None:
    holdings = Holdings()
    beat = Heartbeat(queue, holdings, WorkerMetrics(), interval=1, lease=30, owner=OWNER)

    def refused(*args: object, **kwargs: object) -> None:
        raise psycopg.errors.InsufficientPrivilege("permission denied for function register_worker")

    monkeypatch.setattr(queue, "register_worker", refused)
    try:
        assert beat.register() is False
        monkeypatch.undo()
        queue.enqueue("noop", {})
        [job] = [_hold(holdings, c) for c in queue.claim(OWNER, job_types=["noop"])]
        before = _rows(queue.dsn)
        beat.beat()
        assert not beat.registered and _secret(queue.dsn) is None  # it did not ask again
        assert _rows(queue.dsn)[job.id][1] > before[job.id][1]  # type: ignore[operator]
    finally:
        beat._close()


def test_a_busy_workers_heartbeat_thread_rotates_the_ready_ring(
    queue: Queue, heartbeat: tuple[Heartbeat, Holdings]
) -> None:
    beat, holdings = heartbeat
    waiting = queue.enqueue("later", {})
    queue.enqueue("noop", {})
    _hold(holdings, queue.claim(OWNER, job_types=["noop"])[0])
    with psycopg.connect(queue.dsn, autocommit=True) as conn:
        # The waiting job's ready row, put in a segment that stays old for the next 20 s.
        [(old,)] = conn.execute(
            "UPDATE pgwork.ready SET segment = (pgwork.ready_segment(now()) + 3) %% 8"
            " WHERE job_id = %s RETURNING segment",
            [waiting],
        ).fetchall()
        beat.rotate()  # the worker claimed since it last rotated: it rotates
        [(segment,)] = conn.execute("SELECT segment FROM pgwork.ready WHERE job_id = %s", [waiting]).fetchall()
        [(size,)] = conn.execute(
            "SELECT pg_relation_size(format('pgwork.ready_%%s', %s::int)::regclass)", [old]
        ).fetchall()
    assert segment != old and size == 0  # moved to the current segment, the old one truncated


def _ring_rows(dsn: str) -> int:
    with psycopg.connect(dsn) as conn:
        [(n,)] = conn.execute("SELECT count(*) FROM pgwork.ready").fetchall()
    return int(n)


def test_an_idle_worker_does_not_rotate_and_a_worker_that_claimed_since_does(
    queue: Queue, heartbeat: tuple[Heartbeat, Holdings]
) -> None:
    beat, holdings = heartbeat
    waiting = queue.enqueue("later", {})
    old_segment = (
        "UPDATE pgwork.ready SET segment = (pgwork.ready_segment(now()) + 3) %% 8 WHERE job_id = %s RETURNING segment"
    )

    def put_in_old_segment() -> int:
        with psycopg.connect(queue.dsn, autocommit=True) as conn:
            [(old,)] = conn.execute(old_segment, [waiting]).fetchall()
        return int(old)

    def segment() -> int:
        with psycopg.connect(queue.dsn) as conn:
            [(now,)] = conn.execute("SELECT segment FROM pgwork.ready WHERE job_id = %s", [waiting]).fetchall()
        return int(now)

    old = put_in_old_segment()
    beat.rotate()  # nothing claimed, nothing held: idle, no statement sent
    assert segment() == old and beat._conn is None
    queue.enqueue("noop", {})
    job = _hold(holdings, queue.claim(OWNER, job_types=["noop"])[0])
    holdings.remove(job.id)  # claimed and already done: still busy since the last rotation
    beat.rotate()
    assert segment() != old
    old = put_in_old_segment()
    beat.rotate()  # nothing claimed since that rotation and nothing held: idle again
    assert segment() == old and _ring_rows(queue.dsn) == 1


@pytest.mark.parametrize(
    ("wall", "expected"),
    [
        (1_000_000_000.0, 1.0),  # on a boundary: one second after it
        (1_000_000_000.5, 0.5),
        (1_000_000_001.0, 0.0),  # the rotation instant itself
        (1_000_000_001.25, 9.75),  # just past it: the next boundary's
        (1_000_000_009.99, 1.01),
    ],
)
def test_rotation_comes_one_second_after_each_segment_boundary(wall: float, expected: float) -> None:
    assert seconds_to_rotation(wall) == pytest.approx(expected)
