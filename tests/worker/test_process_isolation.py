"""Handlers in child processes (--isolation process): results, errors, progress and checkpoints
cross the process boundary; a child that dies fails only its job and is replaced; a job past its
timeout's grace, or a cancelled one that ignores the request, is stopped by killing its child;
children are recycled by job count and memory; thread isolation still works beside it."""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest

from pgwork.backoff import Backoff
from pgwork.db import Queue
from pgwork.worker.children import ChildPool, ChildStartFailed, job_fields
from pgwork.worker.command import load_app
from pgwork.worker.job import Job
from pgwork.worker.options import WorkerOptions
from pgwork.worker.runtime import Worker
from tests.support.waiting import wait_for
from tests.support.workers import run_in_thread, stop_in_thread

pytestmark = pytest.mark.slow  # each worker spawns children that import the app (about a second)

APP = "pgwork_process_app"
LATER = Backoff(base=300, cap=300, jitter=0)


def _worker(queue: Queue, **kw: Any) -> tuple[Worker, threading.Thread]:
    registry = load_app(APP).registry
    options = WorkerOptions(
        app=APP, worker_id="w-proc", metrics_port=0, heartbeat=0.2, lease=3, isolation="process", **kw
    )
    worker = Worker(Queue(queue.dsn, backoff=LATER), options, registry)
    return worker, run_in_thread(worker)


_stop = stop_in_thread


def _settled(queue: Queue, job_id: int, timeout: float = 30) -> Any:
    def settled() -> Any:
        row = queue.job(job_id)
        return row if row is not None and row.status != "running" and row.attempt_count > 0 else None

    return wait_for(settled, timeout, what=f"job {job_id} settled")


def _result(queue: Queue, job_id: int) -> Any:
    row = queue.job(job_id)
    assert row is not None
    stored = queue.result(row.idempotency_key)
    assert stored is not None, row.last_error
    return stored.result


def test_results_errors_progress_and_checkpoints_cross_the_process_boundary(queue: Queue) -> None:
    ok = queue.enqueue("p-ok", {"echo": "é"})
    failed = queue.enqueue("p-fail", {})
    permanent = queue.enqueue("p-fail", {"permanent": True})
    steps = queue.enqueue("p-steps", {})
    in_loop = queue.enqueue("p-async", {})
    on_thread = queue.enqueue("p-thread", {})
    worker, thread = _worker(queue)
    try:
        for job_id in (ok, failed, permanent, steps, in_loop, on_thread):
            _settled(queue, job_id)
    finally:
        _stop(worker, thread)
    child = _result(queue, ok)
    assert child["echo"] == "é" and child["pid"] != os.getpid() and child["child"] == "1"
    assert _result(queue, in_loop)["pid"] != os.getpid()  # async handlers run in a child too
    assert _result(queue, on_thread)["pid"] == os.getpid()  # its own isolation="thread" wins
    retry = queue.job(failed)
    assert retry is not None and retry.status == "pending"
    assert (retry.last_error or "").startswith("ValueError: boom in the child")
    assert "pgwork_process_app.py" in (retry.last_error or "")  # the child's traceback
    dead = queue.job(permanent)
    assert dead is not None and dead.status == "dead" and "bad input" in (dead.last_error or "")
    assert _result(queue, steps) == {"saved": True, "checkpoint": {"page": 3}, "stopped": False}
    row = queue.job(steps)
    assert row is not None and row.checkpoint == {"page": 3}  # written by the worker, fenced


@pytest.mark.parametrize(
    ("payload", "error"),
    [
        ({"how": "kill"}, "handler process died: signal 9 (killed) after "),
        ({"how": "segv"}, "handler process died: signal 11 (segmentation fault) after "),
        ({"exit": 3}, "handler process died: exit code 3 after "),
    ],
)
def test_a_child_that_dies_fails_only_its_job_and_the_worker_goes_on(
    queue: Queue, payload: dict[str, Any], error: str
) -> None:
    dying = queue.enqueue("p-die", payload)
    worker, thread = _worker(queue, concurrency=2)
    try:
        row = _settled(queue, dying)
        after = queue.enqueue("p-ok", {"echo": "after"})
        _settled(queue, after)
    finally:
        _stop(worker, thread)
    assert row.status == "pending" and row.attempt_count == 1  # retried by its backoff
    assert (row.last_error or "").startswith(error), row.last_error
    assert _result(queue, after)["echo"] == "after"
    assert worker._children is not None and worker._children.replaced >= 1


def test_a_job_past_its_timeout_grace_is_stopped_by_killing_its_child(queue: Queue, tmp_path: Path) -> None:
    marker = tmp_path / "started"
    hung = queue.enqueue("p-hang", {"started_file": str(marker)}, timeout=1)
    worker, thread = _worker(queue, concurrency=1)
    try:
        row = _settled(queue, hung)
        child_pid = int(marker.read_text())
        after = queue.enqueue("p-ok", {})
        _settled(queue, after)  # its slot took a new child
    finally:
        _stop(worker, thread)
    assert row.status == "pending"
    assert (row.last_error or "").startswith("timed out after 1s (handler did not return; its process was killed")
    with pytest.raises(ProcessLookupError):
        os.kill(child_pid, 0)  # no abandoned thread, no stray process: the child is gone
    assert _result(queue, after)["pid"] != child_pid
    assert worker.metrics.registry.get_sample_value("pgwork_worker_abandoned_threads") == 0


def test_a_cancelled_job_that_ignores_the_request_is_stopped_by_killing_its_child(
    queue: Queue, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("pgwork.worker.children.STOP_GRACE", 0.5)
    marker = tmp_path / "started"
    hung = queue.enqueue("p-hang", {"started_file": str(marker)})
    worker, thread = _worker(queue, concurrency=1)
    try:
        wait_for(marker.exists, 30, what="the handler started in its child")
        child_pid = int(marker.read_text())
        queue.cancel([hung])
        row = wait_for(lambda: (r := queue.job(hung)) is not None and r.status == "cancelled" and r, 30)
        wait_for(lambda: not _alive(child_pid), 30, what="the child killed")
    finally:
        _stop(worker, thread)
    assert row.status == "cancelled"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie until its parent reaps it: read its state.
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"
    except OSError:
        return False


def test_children_are_recycled_by_job_count_and_by_memory(queue: Queue) -> None:
    by_count = [queue.enqueue("p-ok", {"n": n}) for n in range(4)]
    worker, thread = _worker(queue, concurrency=1, max_jobs_per_child=2)
    try:
        for job_id in by_count:
            _settled(queue, job_id)
    finally:
        _stop(worker, thread)
    pids = [_result(queue, j)["pid"] for j in by_count]
    assert pids[0] == pids[1] and pids[2] == pids[3] and pids[0] != pids[2]  # two jobs per child

    by_memory = [queue.enqueue("p-ok", {"keep_mb": 64, "n": n}) for n in range(2)]
    worker, thread = _worker(queue, concurrency=1, max_memory_per_child=32 << 20)
    try:
        for job_id in by_memory:
            _settled(queue, job_id)
    finally:
        _stop(worker, thread)
    first, second = (_result(queue, j)["pid"] for j in by_memory)
    assert first != second  # the first child kept 64 MiB, above the 32 MiB limit: replaced


def test_an_app_the_children_cannot_import_stops_the_worker_with_that_error(queue: Queue) -> None:
    registry = load_app(APP).registry
    options = WorkerOptions(app="no_such_module_for_pgwork", worker_id="w-bad", metrics_port=0, isolation="process")
    job_id = queue.enqueue("p-ok", {})
    worker = Worker(Queue(queue.dsn), options, registry)
    try:
        with pytest.raises(ChildStartFailed, match=r"could not import the app.*no_such_module_for_pgwork"):
            worker.run()
    finally:
        worker.queue.close()
    row = queue.job(job_id)
    assert row is not None and row.status == "pending" and row.attempt_count == 0  # nothing was claimed


@dataclass
class _Held:
    """What the pool needs of an attempt (children.Running), without a worker around it."""

    claimed: Any
    job: Job
    timeout: float | None = None
    kill: Any = None


def _held(job_id: int, payload: dict[str, Any]) -> _Held:
    job = Job(id=job_id, job_type="p-batch", payload=payload, attempt=1, max_attempts=3, idempotency_key=f"k{job_id}")
    return _Held(SimpleNamespace(id=job_id), job)


def test_a_batch_call_in_a_child_answers_per_job_and_fails_alone_the_job_it_marks() -> None:
    pool = ChildPool(APP, 1)
    pool.start()
    try:
        pool.wait_ready(threading.Event())
        held = [_held(1, {}), _held(2, {"bad": True}), _held(3, {})]
        ended = pool.run_batch(cast(Any, held), [job_fields(h.job) for h in held])
        assert isinstance(ended, list) and len(ended) == 3
        assert ended[0].value["id"] == 1 and ended[2].value["id"] == 3 and ended[0].value["pid"] != os.getpid()
        assert type(ended[1].error).__name__ == "ValueError" and "bad text 2" in str(ended[1].error)
        assert all(h.job.reported_progress is not None for h in held)  # progress crossed per job
        # A call the child cannot answer with one entry per job fails as a whole.
        short = [_held(4, {"short": True}), _held(5, {})]
        whole = pool.run_batch(cast(Any, short), [job_fields(h.job) for h in short])
        assert isinstance(whole, BaseException) and "returned 1 entries for 2 jobs" in str(whole)
    finally:
        pool.close()
