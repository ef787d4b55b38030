"""Plain handlers at a large --batch claim the next batch while the current one runs (issue 28):
never more than one whole batch ahead, the jobs held ahead heartbeated and never started once
their lease is lost, and released unstarted on shutdown; and only while the jobs run quickly
enough for that to pay (claims.ahead_pays): a worker of slow jobs holds no batch ahead."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any

import psycopg

from pgwork.db import Queue
from pgwork.models import NewJob
from pgwork.worker.job import Job
from pgwork.worker.registry import Registry
from tests.support.waiting import wait_for
from tests.support.workers import InProcess

BATCH = 20  # over PIPELINE_MAX_BATCH: claimed by the main loop, a whole batch ahead
CONCURRENCY = 2


def _status(queue: Queue, ids: list[int]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for i in ids:
        row = queue.job(i)
        assert row is not None
        counts[row.status] = counts.get(row.status, 0) + 1
    return counts


def _renewed(queue: Queue) -> int:
    """Running jobs whose lease (their own, or their worker's lease once adopted) reaches past the
    3 s the claim gave it."""
    with psycopg.connect(queue.dsn) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pgwork.jobs AS j"
            " LEFT JOIN pgwork.worker_leases AS w ON w.owner = j.lease_owner AND j.worker_lease_token = j.lease_token"
            " WHERE j.status = 'running'"
            " AND greatest(j.lease_expires_at, w.expires_at) > j.started_at + interval '3.5 s'"
        ).fetchone()
    return 0 if row is None else int(row[0])


@dataclass
class Blocked:
    ids: list[int]
    started: list[int]
    release: threading.Event


def _warmed(queue: Queue, jobs: int, *, warm: float = 0.0, **options: Any) -> tuple[InProcess, Blocked]:
    """A worker that first ran one batch of jobs taking `warm` seconds each, then finds `jobs`
    blocked ones enqueued at once (one statement: its next claim comes back full)."""
    registry = Registry()
    release = threading.Event()
    started: list[int] = []

    def held(job: Job) -> dict[str, int]:
        if "warm" in job.payload:
            time.sleep(warm)
            return {}
        started.append(job.payload["n"])
        release.wait(30)
        return {}

    registry.register("ahead", held)
    first = queue.enqueue_many([NewJob("ahead", {"warm": n}) for n in range(BATCH)])
    running = InProcess(queue.dsn, registry, "ahead", batch=BATCH, concurrency=CONCURRENCY, **options)
    wait_for(lambda: _status(queue, first) == {"succeeded": BATCH}, 30, what="the warm-up batch done")
    ids = queue.enqueue_many([NewJob("ahead", {"n": n}) for n in range(jobs)])
    return running, Blocked(ids, started, release)


def test_one_whole_batch_ahead_and_no_more(queue: Queue) -> None:
    running, b = _warmed(queue, 3 * BATCH)
    ids, started, release = b.ids, b.started, b.release
    try:
        # The capacity (one batch: two running, the rest queued) and one whole batch ahead of it.
        wait_for(lambda: _status(queue, ids).get("running") == 2 * BATCH, 20, what="a batch claimed ahead")
        # Every job held, those ahead too, is heartbeated: its lease renewed past the claim's.
        wait_for(lambda: _renewed(queue) == 2 * BATCH, 20, what="every held lease renewed")
        assert _status(queue, ids) == {"running": 2 * BATCH, "pending": BATCH}  # not the backlog
        assert sorted(started) == [0, 1]
        release.set()
        wait_for(lambda: _status(queue, ids) == {"succeeded": 3 * BATCH}, 30, what="every job done")
    finally:
        release.set()
        running.stop()
    rows = [queue.job(i) for i in ids]
    assert all(r is not None and r.attempt_count == 1 for r in rows)  # one claim each
    assert sorted(started) == list(range(3 * BATCH))  # each handler ran once


def test_slow_jobs_hold_no_batch_ahead(queue: Queue) -> None:
    # The warm-up's jobs took 0.15 s each: a batch runs in 20 x 0.15 / 2 = 1.5 s in the slots, and a
    # batch held ahead would save one claim's few milliseconds per 1.5 s while keeping 20 jobs leased.
    running, b = _warmed(queue, 3 * BATCH, warm=0.15)
    try:
        wait_for(lambda: _status(queue, b.ids).get("running") == BATCH, 20, what="the first blocked batch")
        # Well after any claim ahead would have come: every held lease renewed by the heartbeat.
        wait_for(lambda: _renewed(queue) == BATCH, 20, what="every held lease renewed")
        assert _status(queue, b.ids) == {"running": BATCH, "pending": 2 * BATCH}
        b.release.set()
        wait_for(lambda: _status(queue, b.ids) == {"succeeded": 3 * BATCH}, 30, what="every job done")
    finally:
        b.release.set()
        running.stop()


def test_a_job_held_ahead_whose_lease_is_lost_is_never_started(queue: Queue) -> None:
    running, b = _warmed(queue, 2 * BATCH)
    ids, started, release = b.ids, b.started, b.release
    stolen = ids[-1]  # in the batch held ahead: queued, not started
    try:
        wait_for(lambda: _status(queue, ids).get("running") == 2 * BATCH, 20, what="a batch claimed ahead")
        with psycopg.connect(queue.dsn) as conn:  # another holder now: a new token
            conn.execute("UPDATE pgwork.jobs SET lease_token = gen_random_uuid() WHERE id = %s", (stolen,))
        held = running.worker.holdings.get(stolen)
        assert held is not None
        wait_for(lambda: held.job.lease_lost, 20, what="the heartbeat finding the lease lost")
        release.set()
        others = [i for i in ids if i != stolen]
        wait_for(lambda: _status(queue, others) == {"succeeded": len(others)}, 30, what="the others done")
        wait_for(lambda: running.worker.holdings.get(stolen) is None, 20, what="the lost job let go")
    finally:
        release.set()
        running.stop()
    assert 2 * BATCH - 1 not in started  # its handler never ran
    row = queue.job(stolen)
    assert row is not None and row.status == "running"  # nothing written over the new holder's claim


def test_jobs_held_ahead_are_released_unstarted_on_shutdown(queue: Queue) -> None:
    running, b = _warmed(queue, 3 * BATCH, grace=20)
    ids, started, release = b.ids, b.started, b.release
    try:
        wait_for(lambda: _status(queue, ids).get("running") == 2 * BATCH, 20, what="a batch claimed ahead")
        running.worker.request_stop()
        # At once, before the two running jobs end: every job not started goes back.
        wait_for(lambda: _status(queue, ids).get("running") == CONCURRENCY, 20, what="the unstarted released")
        release.set()
        running.join(20)
    finally:
        release.set()
    assert _status(queue, ids) == {"succeeded": CONCURRENCY, "pending": 3 * BATCH - CONCURRENCY}
    rows = [queue.job(i) for i in ids]
    # Released jobs keep the claim they had (attempt_count counts claims); the rest were never claimed.
    assert sorted(r.attempt_count for r in rows if r is not None) == [0] * BATCH + [1] * 2 * BATCH
    assert sorted(started) == [0, 1]


def test_a_one_runner_worker_at_a_large_batch_writes_its_outcomes_in_batches(queue: Queue) -> None:
    # One runner writing its own outcome (a one-job worker's shortcut) wrote one job per write here,
    # as no claim can ride on a write this large: 1,400 jobs/s at --batch 100.
    registry = Registry()
    registry.register("quick", lambda job: {})
    ids = [queue.enqueue("quick", {"n": n}) for n in range(3 * BATCH)]
    running = InProcess(queue.dsn, registry, "ahead", batch=BATCH, concurrency=1, burst=True)
    running.join(60)
    assert _status(queue, ids) == {"succeeded": 3 * BATCH}
    assert running.worker.finisher.flushes <= len(ids) // 4, running.worker.finisher.flushes
