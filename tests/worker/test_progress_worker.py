"""Progress and checkpoints from a handler in a real `pgwork worker`: progress reaches the row
with the heartbeat (and `pgwork running`, and /metrics), a checkpoint survives SIGKILL, and the
next worker's attempt resumes from it after the reaper returns the job."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import urllib.request

import pytest

import pgwork
from pgwork.db import Queue
from pgwork.errors import InvalidArgument
from pgwork.worker.job import Job, StopReason
from tests.support.waiting import wait_for
from tests.support.workers import ROOT, Spawn, free_port, worker_env


def _job(**extra: object) -> Job:
    return Job(id=1, job_type="pages", payload={}, attempt=1, max_attempts=5, idempotency_key="k", **extra)  # type: ignore[arg-type]


def _metric(port: int, name: str) -> float | None:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    for line in text.splitlines():
        if line.startswith(f'{name}{{job_type="pages"}}'):
            return float(line.rsplit(" ", 1)[1])
    return None


@pytest.mark.slow
def test_a_checkpoint_survives_sigkill_and_the_next_attempt_resumes_from_it(queue: Queue, spawn_worker: Spawn) -> None:
    job_id = queue.enqueue("pages", {"pages": 5, "stall_at": 3})
    port = free_port()
    w1 = spawn_worker("--job-types", "pages", "--lease", "2s", "--heartbeat", "0.3s", "--metrics-port", str(port))
    # The progress arrives with a heartbeat; the checkpoint was written before it.
    running = wait_for(
        lambda: [r for r in queue.running() if r.id == job_id and r.progress == 0.6],
        20,
        what="the stalled job's progress to reach pgwork.running",
    )
    assert running[0].progress_note == "page 3 of 5" and running[0].since_checkpoint_seconds is not None
    row = queue.job(job_id)
    assert row is not None and row.checkpoint == {"page": 3}
    # `pgwork running` shows it, and the worker's gauges count it.
    shown = subprocess.run(
        [sys.executable, "-m", "pgwork.cli", "--dsn", queue.dsn, "running", "--json"],
        capture_output=True, text=True, env=worker_env(), cwd=str(ROOT), check=True, timeout=60,
    )  # fmt: skip
    [listed] = [r for r in json.loads(shown.stdout) if r["id"] == job_id]
    assert (listed["progress"], listed["progress_note"]) == (0.6, "page 3 of 5")
    assert _metric(port, "pgwork_job_progress_reporting") == 1.0
    assert _metric(port, "pgwork_job_progress_sum") == pytest.approx(0.6)

    w1.signal(signal.SIGKILL)
    assert w1.wait(10) == -signal.SIGKILL
    reaped = wait_for(queue.reap, 15, interval=0.2, what="the lease to lapse and the reaper to return the job")
    assert [(r.id, r.status, r.attempt_count) for r in reaped] == [(job_id, "pending", 1)]
    w2 = spawn_worker("--job-types", "pages", "--lease", "2s", "--heartbeat", "0.3s", "--poll", "0.2s")
    wait_for(lambda: (r := queue.job(job_id)) is not None and r.status == "succeeded", 30, what="w2 to finish")
    result = queue.result(row.idempotency_key)
    assert result is not None and result.result == {"resumed_after_page": 3, "attempt": 2}
    done = queue.job(job_id)
    assert done is not None and done.checkpoint == {"page": 5}
    w2.signal(signal.SIGTERM)
    assert w2.wait(10) == 0


def test_a_bad_fraction_is_the_handlers_error_and_names_the_fix(queue: Queue, spawn_worker: Spawn) -> None:
    job_id = queue.enqueue("bad_progress", {}, max_attempts=1)
    w = spawn_worker("--job-types", "bad_progress", "--burst", "--heartbeat", "0.2s", "--lease", "2s")
    assert w.wait(60) == 0
    row = queue.job(job_id)
    assert row is not None and row.status == "dead"
    assert "fraction" in (row.last_error or "") and "0.4 for 4 of 10, not 40" in (row.last_error or "")
    assert row.progress is None


def test_a_job_made_by_hand_keeps_its_checkpoints_in_memory() -> None:
    job = _job(last_checkpoint={"page": 2})
    state = {"page": 3}
    assert job.checkpoint(state) is True
    state["page"] = 99  # later changes are not saved
    assert job.last_checkpoint == {"page": 3}
    job.progress(0.5, "half")
    assert job.reported_progress == pgwork.Progress(0.5, "half")
    with pytest.raises(InvalidArgument, match="over the limit"):
        job.checkpoint({"blob": "x" * 70_000})
    assert job.last_checkpoint == {"page": 3}


def test_a_refused_checkpoint_stops_the_job_as_lost() -> None:
    job = _job()
    job.saver = lambda state: False
    assert job.checkpoint({"page": 1}) is False
    assert job.should_stop and job.stop_reason is StopReason.LEASE_LOST and job.last_checkpoint is None


def test_progress_goes_to_one_heartbeat_and_back_when_that_one_fails() -> None:
    job = _job()
    job.progress(0.2)
    taken = job.take_progress()
    assert taken == pgwork.Progress(0.2) and job.take_progress() is None
    job.untake_progress(taken)
    job.progress(0.3)  # newer than the one that failed to go: it wins
    assert job.take_progress() == pgwork.Progress(0.3)
    job.untake_progress(pgwork.Progress(0.2))
    assert job.take_progress() == pgwork.Progress(0.2)


def test_current_job_outside_a_handler_says_so() -> None:
    with pytest.raises(RuntimeError, match="outside a handler"):
        pgwork.current_job()
