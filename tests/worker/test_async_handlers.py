"""What is particular to `async def` handlers: they run at once up to --concurrency on the event
loop (proved by a barrier only reachable with all of them in flight, not by timing), share the
slots with plain handlers in one worker, a blocked loop is warned about, and the shapes a
handler cannot have are refused at registration. The outcomes they share with plain handlers
are in test_outcomes.py and test_lifecycle.py, run for both kinds."""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
import threading
import uuid
from pathlib import Path
from typing import Any

import pgwork_test_app
import pytest

import pgwork
from pgwork.db import Queue
from pgwork.errors import InvalidArgument
from pgwork.worker.attempt import AttemptState
from pgwork.worker.job import Job
from pgwork.worker.options import WorkerOptions
from pgwork.worker.registry import REGISTRY, Registry, is_async_callable
from pgwork.worker.runtime import Worker
from tests.support.waiting import wait_for
from tests.support.workers import Kind, run_burst


def test_n_jobs_run_at_once_up_to_the_concurrency(queue: Queue, kind: Kind) -> None:
    # Each job returns only once all four are inside their handler together: one at a time
    # (or three at a time) they would fail on the barrier's timeout instead.
    group = uuid.uuid4().hex
    ids = [queue.enqueue(kind.t("gather"), {"group": group, "n": 4, "i": i}) for i in range(4)]
    run_burst(queue, timeout=90, concurrency=4, batch=4)
    rows = [queue.job(i) for i in ids]
    assert [(r.status, r.attempt_count) for r in rows if r] == [("succeeded", 1)] * 4, [r.last_error for r in rows if r]


def test_a_worker_serving_both_kinds_never_runs_more_than_its_concurrency(queue: Queue) -> None:
    pgwork_test_app.in_flight.update(now=0, peak=0)
    ids = [queue.enqueue(t, {"n": i, "seconds": 0.2}) for i in range(6) for t in ("count", "async-count")]
    worker = run_burst(queue, timeout=60, concurrency=3, batch=12)
    assert all(queue.job(i).status == "succeeded" for i in ids)  # type: ignore[union-attr]
    # The slots are shared: 3 in all (not 3 threads plus 3 tasks), and all 3 were used.
    assert pgwork_test_app.in_flight == {"now": 0, "peak": 3}
    finished = worker.metrics.jobs_finished
    assert finished.labels("count", "succeeded")._value.get() == 6
    assert finished.labels("async-count", "succeeded")._value.get() == 6


def test_an_async_only_worker_starts_no_runner_thread(queue: Queue) -> None:
    job_id = queue.enqueue("async-noop", {"n": 5})
    worker = run_burst(queue, job_types=("async-noop",), concurrency=8)
    assert queue.job(job_id).status == "succeeded"  # type: ignore[union-attr]
    assert worker.runners.threads == 0 and worker.runners.loop is not None
    plain = run_burst(queue, job_types=("noop",))
    assert plain.runners.loop is None  # and a plain-only worker runs no event loop


def test_a_blocked_event_loop_is_warned_about_naming_the_jobs_in_flight(
    queue: Queue, caplog: pytest.LogCaptureFixture
) -> None:
    job_id = queue.enqueue("async-block", {"seconds": 1.5})
    with caplog.at_level(logging.WARNING, logger="pgwork.worker"):
        worker = run_burst(queue, job_types=("async-block",))
    assert queue.job(job_id).status == "succeeded"  # type: ignore[union-attr]  # blocking is slow, not wrong
    [warning] = [r.getMessage() for r in caplog.records if "event loop blocked" in r.getMessage()]
    assert f"job {job_id} (async-block)" in warning and "asyncio.to_thread" in warning
    assert worker.runners.loop is not None and worker.runners.loop.longest_lag >= 1.0


def test_a_plain_handler_that_returns_a_coroutine_is_dead_with_the_fix(queue: Queue) -> None:
    async def real(job: Job) -> int:
        return 1

    def hides_it(job: Job) -> Any:  # a decorator that lost the async def
        return real(job)

    registry = Registry()
    registry.register("hidden", hides_it)
    job_id = queue.enqueue("hidden", {})
    options = WorkerOptions(app="hidden", worker_id="w", burst=True, metrics_port=0)
    worker = Worker(queue, options, registry)
    worker.run()
    row = queue.job(job_id)
    assert row is not None and row.status == "dead" and row.attempt_count == 1
    assert "returned an awaitable instead of a result" in row.last_error and "async def" in row.last_error


async def _async_handler(job: Job) -> int:
    return 1


class _AsyncCallable:
    async def __call__(self, job: Job) -> int:
        return 2


@pytest.mark.parametrize(
    ("func", "expected"),
    [
        (_async_handler, True),
        (functools.partial(_async_handler), True),
        (_AsyncCallable(), True),
        (lambda job: 1, False),
        (print, False),
    ],
)
def test_which_handlers_are_awaited(func: Any, expected: bool) -> None:
    assert is_async_callable(func) is expected


def _gen(job: Job) -> Any:
    yield 1


async def _agen(job: Job) -> Any:
    yield 1


@pytest.mark.parametrize(
    ("func", "words"),
    [(_gen, "is a generator function"), (_agen, "is a generator function"), ("not a function", "is not callable")],
)
def test_a_handler_that_cannot_return_a_result_is_refused_at_registration(func: Any, words: str) -> None:
    for register in (Registry().register, lambda t, f: pgwork.App().handler(t)(f)):
        with pytest.raises(InvalidArgument, match=rf"^handler: .*{words}"):
            register("t", func)


def test_both_decorators_return_the_async_function_itself() -> None:
    app = pgwork.App(name="decorated")

    async def ocr(job: Job) -> dict[str, int]:
        await asyncio.sleep(0)
        return {"pages": 1}

    assert app.handler("ocr")(ocr) is ocr and app.registry.is_async("ocr")
    assert inspect.iscoroutinefunction(pgwork_test_app.async_noop)
    assert REGISTRY.is_async("async-noop") and not REGISTRY.is_async("noop")
    assert REGISTRY.kinds(["noop", "async-noop"]) == (True, True)
    assert REGISTRY.kinds(["async-noop"]) == (False, True)


def test_a_shutdown_release_cancels_the_async_task_at_its_await(queue: Queue, tmp_path: Path) -> None:
    marker = tmp_path / "why"
    job_id = queue.enqueue("async-watch", {"seconds": 60, "marker": str(marker)})
    options = WorkerOptions(app="pgwork_test_app", worker_id="w", grace=0.3, metrics_port=0, poll=0.05)
    worker = Worker(queue, options, REGISTRY)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    wait_for(lambda: (row := queue.job(job_id)) is not None and row.status == "running", 20, what="the claim")
    wait_for(lambda: worker.holdings.count(AttemptState.RUNNING) == 1, 10, what="the task to start")
    worker.request_stop()
    thread.join(15)
    assert not thread.is_alive()
    assert marker.read_text() == "shutdown"  # the task saw CancelledError with the stop reason set
    row = queue.job(job_id)
    assert row is not None and row.status == "pending" and row.attempt_count == 1
    assert "released on shutdown (grace of 0.3s ran out)" in row.last_error
