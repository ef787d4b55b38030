"""Batch handlers (issue 29): one call with up to `batch` jobs of a type, each job still fenced,
heartbeated, retried, timed out, cancelled and finished on its own; partial failures; a crash
mid-batch; and the batch path's throughput on a CPU model whose cost is a + b*n."""

from __future__ import annotations

import asyncio
import signal
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pgwork import PermanentError
from pgwork.backoff import Backoff
from pgwork.db import Queue
from pgwork.errors import InvalidArgument
from pgwork.worker.job import Job
from pgwork.worker.options import OptionError, parse_options
from pgwork.worker.registry import Registry
from pgwork.worker.runtime import Worker
from tests.support.waiting import wait_for
from tests.support.workers import InProcess, Spawn

LATER = Backoff(base=300, cap=300, jitter=0)


def _burst(queue: Queue, registry: Registry, **kw: Any) -> Worker:
    running = InProcess(queue.dsn, registry, "batches", burst=True, **kw)
    running.join(60)
    return running.worker


def _sample(worker: Worker, name: str, job_type: str) -> float:
    value = worker.metrics.registry.get_sample_value(name, {"job_type": job_type})
    return 0.0 if value is None else value


def _done(queue: Queue, ids: list[int]) -> bool:
    """Every job claimed at least once, and none running now."""
    return all((row := queue.job(i)) is not None and row.attempt_count > 0 and row.status != "running" for i in ids)


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_batch_handler_gets_its_jobs_in_one_call_and_each_finishes_on_its_own(queue: Queue, kind: str) -> None:
    registry = Registry()
    calls: list[list[int]] = []

    def embed(jobs: list[Job]) -> list[Any]:
        calls.append([j.id for j in jobs])
        return [{"n": j.payload["n"] * 2} for j in jobs]

    async def embed_async(jobs: list[Job]) -> list[Any]:
        await asyncio.sleep(0)
        return embed(jobs)

    registry.register("embed", embed_async if kind == "async" else embed, batch=4)
    ids = [queue.enqueue("embed", {"n": n}) for n in range(10)]
    worker = _burst(queue, registry)
    assert sorted(i for call in calls for i in call) == ids  # every job once
    assert max(len(c) for c in calls) == 4 and len(calls) == 3  # claimed 4 at a time: 4 + 4 + 2
    for n, job_id in enumerate(ids):
        row = queue.job(job_id)
        assert row is not None and row.status == "succeeded" and row.attempt_count == 1
        result = queue.result(row.idempotency_key)  # each job's own result row, under its own key
        assert result is not None and result.result == {"n": n * 2}
    assert _sample(worker, "pgwork_batch_size_count", "embed") == 3
    assert _sample(worker, "pgwork_batch_size_sum", "embed") == 10
    assert _sample(worker, "pgwork_batch_wait_seconds_count", "embed") == 3
    assert (
        worker.metrics.registry.get_sample_value(
            "pgwork_jobs_finished_total", {"job_type": "embed", "outcome": "succeeded"}
        )
        == 10
    )


def test_outcomes_stay_per_job_an_exception_in_a_jobs_place_fails_that_job_alone(queue: Queue) -> None:
    registry = Registry()

    def mixed(jobs: list[Job]) -> list[Any]:
        out: list[Any] = []
        for job in jobs:
            what = job.payload["what"]
            if what == "retry":
                out.append(ConnectionError("backend busy"))
            elif what == "dead":
                out.append(PermanentError("empty text"))
            else:
                out.append({"ok": job.payload["n"]})
        return out

    registry.register("mixed", mixed, batch=8, backoff=LATER)
    whats = ["ok", "retry", "ok", "dead", "ok"]
    ids = [queue.enqueue("mixed", {"n": n, "what": w}, max_attempts=3) for n, w in enumerate(whats)]
    _burst(queue, registry)
    rows = [queue.job(i) for i in ids]
    assert [r.status for r in rows if r] == ["succeeded", "pending", "succeeded", "dead", "succeeded"]
    assert rows[1] is not None and "ConnectionError: backend busy" in (rows[1].last_error or "")
    assert rows[1].available_at > rows[1].created_at + timedelta(seconds=200)  # its own backoff
    assert rows[3] is not None and "PermanentError: empty text" in (rows[3].last_error or "")
    assert queue.result(rows[0].idempotency_key) is not None and queue.result(rows[1].idempotency_key) is None  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("handler", "error"),
    [
        (lambda jobs: (_ for _ in ()).throw(RuntimeError("model crashed")), "RuntimeError: model crashed"),
        (lambda jobs: [1], "returned 1 entries for 3 jobs"),
        (lambda jobs: {"not": "a list"}, "returned a dict for 3 jobs"),
    ],
)
def test_a_batch_that_raises_or_returns_the_wrong_shape_fails_every_job(queue: Queue, handler: Any, error: str) -> None:
    registry = Registry()
    registry.register("shaky", handler, batch=3, backoff=LATER)
    ids = [queue.enqueue("shaky", {"n": n}) for n in range(3)]
    _burst(queue, registry)
    for job_id in ids:
        row = queue.job(job_id)
        assert row is not None and row.status == "pending" and error in (row.last_error or ""), row


def test_a_job_cancelled_inside_a_batch_is_cancelled_and_the_others_keep_their_results(queue: Queue) -> None:
    registry = Registry()
    inside = threading.Event()

    def slow(jobs: list[Job]) -> list[Any]:
        inside.set()
        # The heartbeat brings the cancellation to the one job; the call goes on for the others.
        wait_for(lambda: jobs[1].should_stop, 20, what="the cancellation reached the job")
        return [{"n": j.payload["n"]} for j in jobs]

    registry.register("slow", slow, batch=3, batch_wait="5s")
    ids = [queue.enqueue("slow", {"n": n}) for n in range(3)]
    running = InProcess(queue.dsn, registry, "batches")
    try:
        wait_for(inside.is_set, 20, what="the batch started")
        queue.cancel([ids[1]])
        wait_for(lambda: _done(queue, ids), 20, what="the batch finished")
    finally:
        running.stop()
    statuses = [queue.job(i).status for i in ids]  # type: ignore[union-attr]
    assert statuses == ["succeeded", "cancelled", "succeeded"]
    assert queue.result(queue.job(ids[1]).idempotency_key) is None  # type: ignore[union-attr]


def test_each_job_of_a_batch_times_out_and_a_stuck_call_is_abandoned_whole(queue: Queue) -> None:
    registry = Registry()
    release = threading.Event()

    def polite(jobs: list[Job]) -> list[Any]:
        while not all(j.should_stop for j in jobs):
            time.sleep(0.01)
        return ["too late"] * len(jobs)

    def stuck(jobs: list[Job]) -> list[Any]:
        release.wait(60)  # ignores should_stop, as a hung model call would
        return ["late"] * len(jobs)

    registry.register("polite", polite, batch=2, timeout="300ms", backoff=LATER)
    registry.register("stuck", stuck, batch=2, timeout="300ms", backoff=LATER)
    polite_ids = [queue.enqueue("polite", {"n": n}) for n in range(2)]
    stuck_ids = [queue.enqueue("stuck", {"n": n}) for n in range(2)]
    running = InProcess(queue.dsn, registry, "batches", concurrency=2)
    try:
        wait_for(lambda: _done(queue, polite_ids + stuck_ids), 30, what="every job timed out")
    finally:
        release.set()
        running.stop()
    for job_id in polite_ids:
        row = queue.job(job_id)
        assert row is not None and row.status == "pending" and row.attempt_count == 1
        assert "timed out after 300ms (the handler stopped when told" in (row.last_error or "")
        assert queue.result(row.idempotency_key) is None
    for job_id in stuck_ids:
        row = queue.job(job_id)
        assert row is not None and row.status == "pending" and row.lease_token is None
        assert "timed out after 300ms (handler did not return)" in (row.last_error or "")
    assert _sample(running.worker, "pgwork_jobs_abandoned_total", "stuck") == 2


def test_a_claimed_job_waits_at_most_batch_wait_and_a_full_batch_goes_at_once(queue: Queue) -> None:
    registry = Registry()
    calls: list[int] = []

    def fill(jobs: list[Job]) -> list[Any]:
        calls.append(len(jobs))
        return [None] * len(jobs)

    registry.register("lonely", fill, batch=8, batch_wait="300ms")
    registry.register("full", fill, batch=3, batch_wait="60s")  # a burst could not end if it waited
    queue.enqueue("lonely", {})
    for n in range(3):
        queue.enqueue("full", {"n": n})
    worker = _burst(queue, registry, job_types=("lonely", "full"))
    assert sorted(calls) == [1, 3]
    # The lone job waited for company for its batch_wait, no more than that plus a poll.
    waited = _sample(worker, "pgwork_batch_wait_seconds_sum", "lonely")
    assert 0.3 <= waited < 5, waited
    assert _sample(worker, "pgwork_batch_wait_seconds_sum", "full") < 5


def _running(queue: Queue, ids: list[int]) -> int:
    return sum(1 for i in ids if (row := queue.job(i)) is not None and row.status == "running")


def test_a_batch_worker_claims_its_next_batch_while_a_call_runs_and_no_more(queue: Queue) -> None:
    registry = Registry()
    release = threading.Event()
    calls: list[list[int]] = []

    def held(jobs: list[Job]) -> list[Any]:
        calls.append([j.payload["n"] for j in jobs])
        release.wait(30)
        return [None] * len(jobs)

    registry.register("held", held, batch=3, batch_wait="60s")
    ids = [queue.enqueue("held", {"n": n}) for n in range(9)]
    running = InProcess(queue.dsn, registry, "batches")
    try:
        # One call runs 3 jobs; the next 3 are claimed ahead of it (heartbeated, not started).
        wait_for(lambda: _running(queue, ids) == 6, 20, what="the next batch claimed ahead")
        assert calls == [[0, 1, 2]]
        assert _running(queue, ids) == 6  # still: one batch ahead, not the backlog
        assert all(queue.job(i).status == "pending" for i in ids[6:])  # type: ignore[union-attr]
        release.set()
        wait_for(lambda: _done(queue, ids), 30, what="every job done")
    finally:
        release.set()
        running.stop()
    # Full batches went at once (no batch_wait), in the claim's order.
    assert calls == [[0, 1, 2], [3, 4, 5], [6, 7, 8]]
    assert all(queue.job(i).status == "succeeded" for i in ids)  # type: ignore[union-attr]


def test_batch_options_are_checked_where_they_are_given() -> None:
    registry = Registry()
    with pytest.raises(InvalidArgument, match="batch"):
        registry.register("x", lambda jobs: jobs, batch=0)
    with pytest.raises(InvalidArgument, match="batch_wait: is only for batch handlers"):
        registry.register("x", lambda job: None, batch_wait="20ms")
    with pytest.raises(InvalidArgument, match="batch_wait"):
        registry.register("x", lambda jobs: jobs, batch=4, batch_wait="soon")
    with pytest.raises(InvalidArgument, match="out of range"):
        registry.register("x", lambda jobs: jobs, batch=4, batch_wait="10m")
    spec = registry.spec("x")
    assert spec is None
    registry.register("x", lambda jobs: jobs, batch=4, batch_wait=timedelta(milliseconds=20))
    spec = registry.spec("x")
    assert spec is not None and (spec.batch, spec.batch_wait) == (4, 0.02)
    assert parse_options(app="m", worker_id="w", environ={}, batch_wait="20ms").batch_wait == 0.02
    assert parse_options(app="m", worker_id="w", environ={}).batch_wait is None
    with pytest.raises(OptionError, match="--batch-wait"):
        parse_options(app="m", worker_id="w", environ={}, batch_wait="10m")


def test_a_worker_killed_mid_batch_leaves_every_job_to_the_reaper(
    queue: Queue, spawn_worker: Spawn, tmp_path: Path
) -> None:
    marker = tmp_path / "started"
    ids = [
        queue.enqueue("batch-sleep", {"n": n, "seconds": 60, "started_file": str(marker)}, max_attempts=3)
        for n in range(5)
    ]
    worker = spawn_worker("--app", "pgwork_batch_app", "--lease", "2s")
    wait_for(marker.exists, 30, what="the batch handler started")
    worker.proc.send_signal(signal.SIGKILL)
    worker.proc.wait(10)
    assert all(queue.job(i).status == "running" for i in ids)  # type: ignore[union-attr]
    reaped = queue.reap(now=datetime.now(UTC) + timedelta(seconds=60))
    assert sorted(r.id for r in reaped) == ids
    for job_id in ids:
        row = queue.job(job_id)
        assert row is not None and row.status == "pending" and row.attempt_count == 1


# -- throughput on a CPU model ---------------------------------------------------------------

WIDTH = 128
rng = np.random.default_rng(7)
FIXED = rng.standard_normal((320, 320)).astype(np.float32)
WEIGHTS = rng.standard_normal((WIDTH, WIDTH)).astype(np.float32) / np.sqrt(WIDTH)


def model(count: int) -> np.ndarray[Any, Any]:
    """Cost a + b*n: a fixed part (a weight load, a kernel launch) and a part per sequence."""
    for _ in range(4):
        np.dot(FIXED, FIXED)
    x = np.ones((count, WIDTH), dtype=np.float32)
    for _ in range(32):
        x = np.tanh(x @ WEIGHTS)
    return x


@pytest.mark.slow
def test_the_batch_path_beats_one_job_per_call_on_a_cost_a_plus_bn_model(queue: Queue) -> None:
    counts = {"one": 32, "many": 256}
    registry = Registry()
    sizes: list[int] = []
    spans: dict[str, list[float]] = {"one": [], "many": []}  # the first call's start, each call's end

    def timed(job_type: str, count: int) -> np.ndarray[Any, Any]:
        if not spans[job_type]:
            spans[job_type].append(time.perf_counter())
        out = model(count)
        spans[job_type].append(time.perf_counter())
        return out

    def one(job: Job) -> float:
        return float(timed("one", 1)[0, 0])

    def many(batch: list[Job]) -> list[float]:
        sizes.append(len(batch))
        return [float(v) for v in timed("many", len(batch))[:, 0]]

    registry.register("one", one)
    registry.register("many", many, batch=32, batch_wait="20ms")
    for job_type, count in counts.items():
        ids = [queue.enqueue(job_type, {"n": n}) for n in range(count)]
        _burst(queue, registry, job_types=(job_type,))
        assert all(queue.job(i).status == "succeeded" for i in ids)  # type: ignore[union-attr]
    # The bare loops, after the workers, on the same (shared) machine.
    bare: dict[str, float] = {}
    for label, size, rounds in (("one", 1, 16), ("many", 32, 8)):
        started = time.perf_counter()
        for _ in range(rounds):
            model(size)
        bare[label] = size * rounds / (time.perf_counter() - started)
    # From the first call's start to the last call's end: the worker's own start and exit aside.
    rate = {t: counts[t] / (spans[t][-1] - spans[t][0]) for t in counts}
    print(
        f"\nCPU model a+b*n: bare loop {bare['one']:.0f}/s one per call, {bare['many']:.0f}/s in batches of 32; "
        f"pgwork one job per call {rate['one']:.0f} jobs/s ({rate['one'] / bare['one']:.2f}x its bare loop), "
        f"batch handler {rate['many']:.0f} jobs/s ({rate['many'] / bare['many']:.2f}x its bare loop, "
        f"{rate['many'] / rate['one']:.1f}x one per call); batch sizes {sorted(set(sizes))}"
    )
    # The batch path's shape, not a timing: the model was called with full batches (the last
    # may be short), so its modelled cost is a fraction of one call per job.
    assert sum(sizes) == counts["many"] and len(sizes) <= counts["many"] // 32 + 2
