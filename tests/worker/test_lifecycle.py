"""A worker's life against real PostgreSQL, with real `pgwork worker` subprocesses; the stories
that depend on how a handler runs are told for a plain handler and its `async def` twin (`kind`)."""

from __future__ import annotations

import signal
import time
from datetime import timedelta
from pathlib import Path

import psycopg
import pytest

from pgwork.db import Queue
from tests.support.waiting import stays, wait_for
from tests.support.workers import Kind, Spawn


def status(queue: Queue, job_id: int) -> str:
    row = queue.job(job_id)
    assert row is not None
    return str(row.status)


def running_owner(queue: Queue, job_id: int) -> str | None:
    row = queue.job(job_id)
    return row.lease_owner if row and row.status == "running" else None


@pytest.mark.slow
def test_sigkill_mid_job_lease_expires_reaper_hands_it_on(queue: Queue, spawn_worker: Spawn) -> None:
    # w1's attempt outlasts w2's start however slow a loaded machine is (a 2 s job could finish
    # before w2 was up and the kill); w2's attempt is short.
    payload = {"seconds": 0.5, "first_attempt_seconds": 600, "n": 1}
    job_id = queue.enqueue("sleep", payload, key="doc-1")
    w1 = spawn_worker("--lease", "2s", "--heartbeat", "0.5s")
    wait_for(lambda: running_owner(queue, job_id) == "w1", what="w1 to claim the job")
    w2 = spawn_worker("--lease", "2s", "--heartbeat", "0.5s", "--poll", "0.2s")
    wait_for(lambda: "taking" in w2.log(), what="w2 to start")
    w1.signal(signal.SIGKILL)
    assert w1.wait(60) == -signal.SIGKILL
    # Nothing changes by itself: the row still names the dead owner until its lease lapses. The
    # reaper is asked as of an instant inside the last lease w1 wrote (the 2 s lease may already
    # have lapsed by the clock when the machine is loaded).
    row = queue.job(job_id)
    assert row is not None and row.status == "running" and row.lease_owner == "w1"
    assert row.lease_expires_at is not None
    assert queue.reap(now=row.lease_expires_at - timedelta(milliseconds=1)) == []
    assert running_owner(queue, job_id) == "w1"
    reclaimed = wait_for(queue.reap, interval=0.2, what="the lease to lapse and the reaper to act")
    assert [(r.id, r.previous_owner, r.attempt_count, r.status) for r in reclaimed] == [(job_id, "w1", 1, "pending")]
    wait_for(lambda: status(queue, job_id) == "succeeded", what="w2 to finish the job")
    row = queue.job(job_id)
    assert row is not None and row.attempt_count == 2 and row.lease_owner == "w2"
    assert "[lease expired, reclaimed from w1" in row.last_error
    result = queue.result("doc-1")
    assert result is not None and result.produced_by == "w2" and result.result["attempt"] == 2
    with psycopg.connect(queue.dsn) as conn:
        assert conn.execute("SELECT count(*) FROM pgwork.job_results").fetchone() == (1,)
    w2.signal(signal.SIGTERM)
    assert w2.wait(60) == 0


@pytest.mark.slow
def test_sigterm_drains_then_releases_and_leaves_nothing_for_the_reaper(
    queue: Queue, spawn_worker: Spawn, kind: Kind, tmp_path: Path
) -> None:
    stuck_started = tmp_path / "stuck-started"
    short = queue.enqueue(kind.t("sleep"), {"seconds": 1.0, "n": 1}, priority=1)
    stuck = queue.enqueue(
        kind.t("sleep"), {"seconds": 60, "busy": True, "n": 2, "started_file": str(stuck_started)}, priority=2
    )
    unstarted = queue.enqueue(kind.t("sleep"), {"seconds": 0, "n": 3}, priority=3)
    w = spawn_worker("--concurrency", "2", "--batch", "3", "--grace", "2s")
    wait_for(
        lambda: running_owner(queue, stuck) == "w1" and running_owner(queue, unstarted) == "w1",
        20,
        what="all three claimed",
    )
    # The stuck job must be running (not only claimed) for the grace to be what ends it.
    wait_for(stuck_started.exists, 20, what="the stuck handler to start")
    started = time.monotonic()
    w.signal(signal.SIGTERM)
    assert w.wait(15) == 0
    took = time.monotonic() - started
    assert 1.5 < took < 10, took  # waited out the grace for the stuck job, no longer
    assert status(queue, short) == "succeeded"
    for job_id, note in ((stuck, "released on shutdown (grace of 2s ran out)"), (unstarted, "released unstarted")):
        row = queue.job(job_id)
        assert row is not None
        assert row.status == "pending"
        assert row.lease_owner is None and row.lease_token is None and row.lease_expires_at is None
        assert row.attempt_count == 1  # counts claims: a release is not refunded
        assert note in row.last_error and "(w1, attempt 1)" in row.last_error
    assert queue.running() == []
    assert queue.reap() == []
    assert "released on shutdown" in w.log()


@pytest.mark.slow
def test_second_signal_releases_at_once(queue: Queue, spawn_worker: Spawn, kind: Kind, tmp_path: Path) -> None:
    started_file = tmp_path / "stuck-started"
    stuck = queue.enqueue(kind.t("sleep"), {"seconds": 60, "busy": True, "started_file": str(started_file)})
    w = spawn_worker("--grace", "60s")
    wait_for(lambda: running_owner(queue, stuck) == "w1", 20, what="claim")
    # Running, not only claimed: a job claimed but not started is released at once by the first
    # signal, and the worker would exit before the second one arrived.
    wait_for(started_file.exists, 20, what="the handler to start")
    w.signal(signal.SIGTERM)
    wait_for(lambda: "stop requested" in w.log(), 10, what="the worker to begin draining")
    stays(w.alive, duration=0.5, what="the draining worker")  # the grace is a minute
    started = time.monotonic()
    w.signal(signal.SIGINT)
    assert w.wait(10) == 0, w.log()[-4000:]
    assert time.monotonic() - started < 5
    row = queue.job(stuck)
    assert row is not None and row.status == "pending" and "second stop signal" in row.last_error


def test_idle_worker_stops_at_once_on_sigterm(queue: Queue, spawn_worker: Spawn) -> None:
    w = spawn_worker()
    wait_for(lambda: "taking" in w.log(), 20, what="worker start")
    w.signal(signal.SIGTERM)
    assert w.wait(10) == 0


@pytest.mark.slow
def test_job_longer_than_its_lease_completes_because_heartbeats_renew_it(
    queue: Queue, spawn_worker: Spawn, kind: Kind
) -> None:
    job_id = queue.enqueue(kind.t("sleep"), {"seconds": 3.5, "n": 1})
    w = spawn_worker("--lease", "1s", "--heartbeat", "0.3s", "--burst")
    wait_for(lambda: running_owner(queue, job_id) == "w1", 20, what="claim")
    reaped = []
    while w.alive():
        reaped += queue.reap()  # an eager reaper the whole time: it must find nothing
        time.sleep(0.1)
    assert w.wait(5) == 0
    assert reaped == []
    row = queue.job(job_id)
    assert row is not None and row.status == "succeeded" and row.attempt_count == 1


@pytest.mark.slow
def test_cancelling_a_running_job(queue: Queue, spawn_worker: Spawn, tmp_path: Path, kind: Kind) -> None:
    marker = tmp_path / "why"
    job_id = queue.enqueue(kind.t("watch"), {"seconds": 60, "marker": str(marker)})
    w = spawn_worker("--lease", "3s", "--heartbeat", "0.3s")
    wait_for(lambda: running_owner(queue, job_id) == "w1", 20, what="claim")
    report = queue.cancel([job_id])
    assert report.requested == [job_id]
    wait_for(lambda: status(queue, job_id) == "cancelled", 10, what="the worker to stop the job")
    assert wait_for(lambda: marker.exists() and marker.read_text(), 5, what="marker") == "cancelled"
    row = queue.job(job_id)
    assert row is not None and "cancelled while running on w1" in row.last_error
    assert queue.result(row.idempotency_key) is None  # the effect was never written
    # The worker carries on with other work.
    next_id = queue.enqueue(kind.t("noop"), {"n": 1})
    wait_for(lambda: status(queue, next_id) == "succeeded", 10, what="the next job")
    w.signal(signal.SIGTERM)
    assert w.wait(10) == 0


@pytest.mark.slow
def test_lease_lost_means_no_effect(queue: Queue, spawn_worker: Spawn, tmp_path: Path, kind: Kind) -> None:
    marker = tmp_path / "why"
    job_id = queue.enqueue(kind.t("watch"), {"seconds": 60, "marker": str(marker)})
    w = spawn_worker("--lease", "3s", "--heartbeat", "0.3s")
    wait_for(lambda: running_owner(queue, job_id) == "w1", 20, what="claim")
    # Someone else takes the job over (as the reaper would after a stall): a new token.
    with psycopg.connect(queue.dsn, autocommit=True) as conn:
        conn.execute(
            "UPDATE pgwork.jobs SET lease_token = gen_random_uuid(), lease_owner = 'w9' WHERE id = %s", (job_id,)
        )
    assert wait_for(lambda: marker.exists() and marker.read_text(), 5, what="marker") == "lease_lost"
    wait_for(lambda: "result discarded" in w.log(), 10, what="the worker to give the job up")
    row = queue.job(job_id)
    assert row is not None and row.status == "running" and row.lease_owner == "w9"
    assert queue.result(row.idempotency_key) is None
    w.signal(signal.SIGTERM)
    assert w.wait(10) == 0


def _listening(dsn: str, app: str) -> bool:
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND application_name = %s",
            (app,),
        ).fetchone()
        return bool(row and row[0])


@pytest.mark.slow
def test_listen_wakes_an_idle_worker_long_before_its_next_poll(queue: Queue, spawn_worker: Spawn) -> None:
    w = spawn_worker("--poll", "5m")
    wait_for(lambda: _listening(queue.dsn, "pgwork-worker:w1-listen"), 20, what="the LISTEN connection")
    wait_for(lambda: "taking" in w.log(), 20, what="the worker's first claim loop")
    latencies = []
    for n in range(3):
        job_id = queue.enqueue("noop", {"n": n})
        wait_for(lambda j=job_id: status(queue, j) == "succeeded", 10, interval=0.01, what="the woken claim")
        row = queue.job(job_id)
        assert row is not None
        latencies.append((row.started_at - row.created_at).total_seconds())
    # With a 5-minute poll only the notification can explain a claim within seconds.
    assert max(latencies) < 5, latencies
    w.signal(signal.SIGTERM)
    assert w.wait(10) == 0


@pytest.mark.slow
def test_no_listen_mode_polls_without_a_listen_connection(queue: Queue, spawn_worker: Spawn) -> None:
    w = spawn_worker("--no-listen", "--poll", "0.2s")
    wait_for(lambda: _listening(queue.dsn, "pgwork-worker:w1"), 20, what="the worker's pool")
    job_id = queue.enqueue("noop", {"n": 1})
    wait_for(lambda: status(queue, job_id) == "succeeded", 10, what="the polled claim")
    assert not _listening(queue.dsn, "pgwork-worker:w1-listen")
    w.signal(signal.SIGTERM)
    assert w.wait(10) == 0
