"""Batch handlers in child processes: one call per batch in a child, outcomes per job, and a
child that dies mid-batch fails only that call's jobs (each retried by its backoff)."""

from __future__ import annotations

import os
import threading
from typing import Any

import pytest

from pgwork.backoff import Backoff
from pgwork.db import Queue
from pgwork.worker.command import load_app
from pgwork.worker.options import WorkerOptions
from pgwork.worker.runtime import Worker
from tests.support.waiting import wait_for

pytestmark = pytest.mark.slow  # the worker spawns a child that imports the app

APP = "pgwork_process_batch_app"


def _settled(queue: Queue, ids: list[int]) -> list[Any]:
    def settled() -> list[Any] | None:
        rows = [queue.job(i) for i in ids]
        done = all(r is not None and r.status != "running" and r.attempt_count > 0 for r in rows)
        return rows if done else None

    return wait_for(settled, 40, what=f"jobs {ids} settled")


def test_a_batch_handler_in_a_child_gets_its_batch_and_answers_per_job(queue: Queue) -> None:
    ids = [queue.enqueue("pb-embed", {"text": t}) for t in ("a", "b", "", "d")]
    crash = [queue.enqueue("pb-embed", {"text": "x", "crash": n == 0, "n": n}) for n in range(4)]
    options = WorkerOptions(app=APP, worker_id="w-pb", metrics_port=0, heartbeat=0.2, lease=3)
    worker = Worker(Queue(queue.dsn, backoff=Backoff(base=300, cap=300, jitter=0)), options, load_app(APP).registry)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        rows = _settled(queue, ids)
        crashed = _settled(queue, crash)
    finally:
        worker.request_stop()
        thread.join(20)
        worker.queue.close()
    results = [queue.result(r.idempotency_key) for r in rows]
    assert [r.status for r in rows] == ["succeeded", "succeeded", "dead", "succeeded"]
    assert "no text" in (rows[2].last_error or "")
    pids = {res.result["pid"] for res in results if res is not None}
    assert len(pids) == 1 and os.getpid() not in pids  # one child called once with the batch
    assert {res.result["n"] for res in results if res is not None} == {4}
    assert all(
        r.status == "pending" and (r.last_error or "").startswith("handler process died: exit code 3") for r in crashed
    )
