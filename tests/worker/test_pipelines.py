"""Pipelines run by real workers: split -> pages (fan-out, pgwork.Then) -> merge (fan-in, `after`),
batch handlers returning Then per job, bad follow-ups, and a worker killed between its handler's
return and its finish (tests/support/apps/pgwork_pipeline_app.py)."""

from __future__ import annotations

import signal
from typing import Any

import pgwork_pipeline_app as app
import psycopg

from pgwork import NewJob, Then
from pgwork.db import Queue
from pgwork.worker.job import Job
from pgwork.worker.registry import Registry
from tests.support.waiting import wait_for
from tests.support.workers import InProcess, Spawn, worker_env


def _burst(queue: Queue, registry: Registry, **kw: Any) -> None:
    InProcess(queue.dsn, registry, "pipelines", burst=True, **kw).join(120)


def _by_status(dsn: str) -> dict[tuple[str, str], int]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute("SELECT job_type, status::text, count(*) FROM pgwork.jobs GROUP BY 1, 2").fetchall()
    return {(t, s): int(n) for t, s, n in rows}


def test_split_pages_merge_runs_each_merge_once_with_every_page(queue: Queue) -> None:
    queue.enqueue_many([NewJob("doc-split", {"doc": d, "pages": 25}) for d in ("a", "b", "c")])
    _burst(queue, app.register(Registry()), concurrency=4, batch=8)
    assert _by_status(queue.dsn) == {
        ("doc-split", "succeeded"): 3,
        ("doc-page", "succeeded"): 75,
        ("doc-merge", "succeeded"): 1 * 3,
    }
    for doc in ("a", "b", "c"):
        merged = queue.result(f"{doc}:merge")
        assert merged is not None and merged.result == {"doc": doc, "pages": list(range(25)), "parents": 25}
    with psycopg.connect(queue.dsn) as conn:
        attempts = conn.execute("SELECT max(attempt_count) FROM pgwork.jobs").fetchone()
    assert attempts == (1,)


def test_a_dead_page_cancels_its_documents_merge_only(queue: Queue) -> None:
    queue.enqueue("doc-split", {"doc": "bad", "pages": 5, "dead_pages": [3]})
    queue.enqueue("doc-split", {"doc": "good", "pages": 5})
    _burst(queue, app.register(Registry()), concurrency=2)
    with psycopg.connect(queue.dsn) as conn:
        rows = conn.execute(
            "SELECT idempotency_key, status::text, last_error FROM pgwork.jobs WHERE job_type = 'doc-merge'"
        ).fetchall()
        page = conn.execute("SELECT id FROM pgwork.jobs WHERE idempotency_key = 'bad:page:3'").fetchone()
    assert page is not None
    merges = {key: (status, error) for key, status, error in rows}
    assert merges["good:merge"][0] == "succeeded"
    assert merges["bad:merge"][0] == "cancelled"
    assert f"it waits for job {page[0]} (doc-page), which ended dead" in (merges["bad:merge"][1] or "")


def test_a_batch_handler_returns_then_per_job_and_each_jobs_children_land_once(queue: Queue) -> None:
    registry = Registry()

    def fan(jobs: list[Job]) -> list[Any]:
        return [
            Then({"n": j.payload["n"]}, jobs=[NewJob("leaf", {"of": j.payload["n"], "k": k}) for k in range(3)])
            for j in jobs
        ]

    registry.register("fan", fan, batch=5)
    registry.register("leaf", lambda job: {"of": job.payload["of"]})
    queue.enqueue_many([NewJob("fan", {"n": n}) for n in range(10)])
    _burst(queue, registry, batch=5)
    with psycopg.connect(queue.dsn) as conn:
        leaves = conn.execute(
            "SELECT (payload->>'of')::int, count(*) FROM pgwork.jobs WHERE job_type = 'leaf' AND status = 'succeeded' "
            "GROUP BY 1 ORDER BY 1"
        ).fetchall()
    assert leaves == [(n, 3) for n in range(10)]


def test_follow_ups_that_cannot_be_stored_send_the_job_dead_and_create_nothing(queue: Queue) -> None:
    registry = Registry()
    registry.register("bad-then", lambda job: Then({"ok": 1}, jobs=[NewJob("leaf", {"x": 1}), NewJob("", {})]))
    registry.register("gone-parent", lambda job: Then(None, jobs=[NewJob("leaf", {}, after=[10**12])]))
    first = queue.enqueue("bad-then", {})
    second = queue.enqueue("gone-parent", {})
    _burst(queue, registry)
    for job_id, problem in ((first, "follow-up 1, from 0"), (second, f"there is no job {10**12}")):
        row = queue.job(job_id)
        assert row is not None and row.status == "dead", row
        assert problem in (row.last_error or ""), row.last_error
    assert _by_status(queue.dsn).get(("leaf", "pending"), 0) == 0


def test_a_worker_killed_between_return_and_finish_creates_no_child(queue: Queue, spawn_worker: Spawn) -> None:
    split = queue.enqueue("doc-split", {"doc": "k", "pages": 4}, max_attempts=3)
    env_worker = spawn_worker(
        "--app", "pgwork_pipeline_app", "--lease", "2s", env=worker_env(PIPELINE_KILL_BEFORE_FINISH="1")
    )
    assert env_worker.wait(60) == -signal.SIGKILL  # killed itself as its finish was about to be written
    row = queue.job(split)
    assert row is not None and row.status == "running"
    assert _by_status(queue.dsn) == {("doc-split", "running"): 1}  # no page, no merge
    reaped: list[int] = []
    wait_for(lambda: reaped.extend(r.id for r in queue.reap()) or reaped == [split], 60, what="the lease lapsed")
    _burst(queue, app.register(Registry()), concurrency=2)
    assert _by_status(queue.dsn) == {
        ("doc-split", "succeeded"): 1,
        ("doc-page", "succeeded"): 4,
        ("doc-merge", "succeeded"): 1,
    }


def test_the_pipeline_runs_under_process_isolation(queue: Queue, spawn_worker: Spawn) -> None:
    # Then travels back from the child; parent_results() is read by the worker for the child.
    queue.enqueue("doc-split", {"doc": "iso", "pages": 3})
    worker = spawn_worker("--app", "pgwork_pipeline_app", "--isolation", "process", "--burst")
    assert worker.wait(120) == 0, worker.log()[-3000:]
    merged = queue.result("iso:merge")
    assert merged is not None and merged.result == {"doc": "iso", "pages": [0, 1, 2], "parents": 3}


def test_a_run_anyway_merge_sees_the_pages_that_succeeded_and_names_the_dead_one(
    queue: Queue, spawn_worker: Spawn
) -> None:
    # In a thread, then in a child process (whose parents the worker reads for it).
    queue.enqueue("doc-split", {"doc": "thread", "pages": 4, "dead_pages": [1], "anyway": True})
    _burst(queue, app.register(Registry()), concurrency=2)
    queue.enqueue("doc-split", {"doc": "child", "pages": 3, "dead_pages": [0], "anyway": True})
    worker = spawn_worker("--app", "pgwork_pipeline_app", "--isolation", "process", "--burst")
    assert worker.wait(120) == 0, worker.log()[-3000:]
    for doc, pages in (("thread", [0, 2, 3]), ("child", [1, 2])):
        merged = queue.result(f"{doc}:merge")
        assert merged is not None
        assert merged.result == {"doc": doc, "pages": pages, "parents": len(pages), "failed": ["dead"]}
