"""pgwork.App: handlers on the object (never the global registry), enqueue with the handler's
defaults, run_worker in-process, `pgwork worker --app MODULE:APP`, and waiting for outcomes."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import time

import psycopg
import pytest

import pgwork
from pgwork.errors import InvalidArgument, JobFailed, WaitTimeout
from pgwork.worker.command import WorkerUsageError, load_app
from pgwork.worker.registry import REGISTRY
from tests.support.waiters import waiter_has_read
from tests.support.waiting import wait_for
from tests.support.workers import ROOT, worker_env


def _burst_cli(dsn: str, target: str, *extra: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "pgwork.cli", "--dsn", dsn, "worker", "--app", target, "--id", "app-w"]
    return subprocess.run(
        [*cmd, "--metrics-port", "0", "--burst", *extra],
        capture_output=True,
        text=True,
        env=worker_env(),
        cwd=str(ROOT),
        timeout=60,
        check=False,
    )


def test_two_apps_keep_their_handlers_apart_and_out_of_the_global_registry() -> None:
    a, b = pgwork.App(name="a"), pgwork.App(name="b")
    a.handler("shared")(lambda job: 1)
    b.handler("shared")(lambda job: 2)  # the same type on another App is no clash
    assert a.registry.job_types() == b.registry.job_types() == ["shared"]
    assert a.registry.get("shared") is not b.registry.get("shared")
    assert REGISTRY.get("shared") is None
    assert REGISTRY.get("app-echo") is None  # importing the test App module registered nothing globally
    with pytest.raises(ValueError, match="already has a handler"):
        a.handler("shared")(lambda job: 3)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [({"max_attempts": 0}, "max_attempts"), ({"max_attempts": True}, "max_attempts"), ({"backoff": 5}, "backoff")],
)
def test_a_bad_handler_option_names_its_field(kwargs: dict[str, object], field: str) -> None:
    with pytest.raises(InvalidArgument, match=rf"^{field}: "):
        pgwork.App().handler("t", **kwargs)(lambda job: None)  # type: ignore[arg-type]


@pytest.mark.parametrize("name", ["ocr-service", "", "1app", "a b"])
def test_an_app_name_is_a_dotted_name(name: str) -> None:
    with pytest.raises(InvalidArgument, match=r"^name: .* is not a dotted name"):
        pgwork.App(name=name)


def test_load_app_takes_the_named_app_only() -> None:
    loaded = load_app("pgwork_test_appobj:app")
    assert loaded.registry.job_types() == ["app-async-echo", "app-broken", "app-echo", "app-slow-retry"]
    assert load_app("pgwork_test_appobj:other").registry.job_types() == ["app-echo"]
    # The module alone means its @pgwork.handler functions; it has none, but it has Apps: name one.
    with pytest.raises(WorkerUsageError) as info:
        load_app("pgwork_test_appobj")
    assert str(info.value).endswith(
        "registers no @pgwork.handler functions, but defines the pgwork.App 'app' (also: other): "
        "run it with --app pgwork_test_appobj:app"
    )
    for target, words in (
        ("pgwork_test_appobj:not_an_app", "is a dict, not a pgwork.App"),
        ("pgwork_test_appobj:missing", "is nothing, not a pgwork.App"),
    ):
        with pytest.raises(WorkerUsageError, match=words):
            load_app(target)


def test_enqueue_defaults_to_the_handlers_max_attempts(dsn: str) -> None:
    with pgwork.App(dsn) as app:
        app.handler("twice", max_attempts=2)(lambda job: None)
        first = app.enqueue("twice", {"n": 1})
        own = app.enqueue("twice", {"n": 2}, max_attempts=7)
        elsewhere = app.enqueue("unhandled", {"n": 3}, key="k3", priority=5)
        rows = {i: app.job(i) for i in (first, own, elsewhere)}
    assert [rows[i].max_attempts for i in (first, own, elsewhere)] == [2, 7, 5]  # type: ignore[union-attr]
    assert (rows[elsewhere].idempotency_key, rows[elsewhere].priority) == ("k3", 5)  # type: ignore[union-attr]


def test_run_worker_in_process_then_wait_returns_the_result(dsn: str) -> None:
    with pgwork.App(dsn, name="inproc") as app:
        app.handler("double")(lambda job: {"twice": job.payload["n"] * 2})
        ids = [app.enqueue("double", {"n": n}) for n in range(3)]
        assert app.run_worker(burst=True, worker_id="inproc-w", poll="50ms") == 0
        assert [app.wait(i, timeout=5) for i in ids] == [{"twice": 0}, {"twice": 2}, {"twice": 4}]


def test_run_worker_runs_async_handlers_concurrently_beside_plain_ones(dsn: str) -> None:
    with pgwork.App(dsn, name="inproc_async") as app:
        arrived: list[int] = []
        everyone = asyncio.Event()

        @app.handler("together")
        async def together(job: pgwork.Job) -> int:
            # Returns only once all three are awaiting here at once (else a TimeoutError).
            arrived.append(job.id)
            if len(arrived) == 3:
                everyone.set()
            await asyncio.wait_for(everyone.wait(), timeout=30)
            return int(job.payload["n"]) * 2

        app.handler("plain")(lambda job: "plain")
        ids = [app.enqueue("together", {"n": n}) for n in range(3)]
        plain = app.enqueue("plain", {})
        assert app.run_worker(burst=True, concurrency=3, batch=4, worker_id="inproc-aw", poll="50ms") == 0
        assert [app.wait(i, timeout=5) for i in ids] == [0, 2, 4]
        assert app.wait(plain, timeout=5) == "plain"


def test_run_worker_checks_its_options_as_the_cli_does(dsn: str) -> None:
    app = pgwork.App(dsn, name="checked")
    app.handler("t")(lambda job: None)
    for kwargs, words in (
        ({"concurrency": 0}, "--concurrency: 0 is out of range"),
        ({"lease": "10s", "heartbeat": "5s"}, "--heartbeat: 5s is more than a third"),
        ({"job_types": ["other"]}, "no handler registered for other in checked"),
    ):
        with pytest.raises((WorkerUsageError, InvalidArgument), match=words):
            app.run_worker(burst=True, **kwargs)  # type: ignore[arg-type]
    app.close()


def test_stop_worker_drains_a_worker_running_on_a_thread(dsn: str) -> None:
    with pgwork.App(dsn, name="threaded") as app:
        app.handler("double")(lambda job: job.payload["n"] * 2)
        codes: list[int] = []
        runner = threading.Thread(target=lambda: codes.append(app.run_worker(worker_id="t-w", poll="50ms")))
        runner.start()
        try:
            job_id = app.enqueue("double", {"n": 21})
            assert app.wait(job_id, timeout=10) == 42
        finally:
            app.stop_worker()
            runner.join(10)
        assert codes == [0] and not runner.is_alive()


def test_a_handlers_own_backoff_spaces_its_retries(dsn: str) -> None:
    with pgwork.App(dsn) as app:
        job_id = app.enqueue("app-slow-retry", {})
    done = _burst_cli(dsn, "pgwork_test_appobj:app")
    assert done.returncode == 0, done.stderr
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            "SELECT status::text, extract(epoch FROM available_at - now()) FROM pgwork.jobs WHERE id = %s", (job_id,)
        ).fetchone()
    assert row is not None and row[0] == "pending"
    assert 800 < float(row[1]) <= 900  # Backoff(base=900, jitter=0), not the default 2s


def test_wait_on_a_job_a_real_burst_worker_finishes(dsn: str) -> None:
    with pgwork.App(dsn) as app:
        job_id = app.enqueue("app-echo", {"doc": 7})
        results: list[object] = []
        waiter = threading.Thread(target=lambda: results.append(app.wait(job_id, timeout=60)))
        waiter.start()
        done = _burst_cli(dsn, "pgwork_test_appobj:app")
        waiter.join(60)
    assert done.returncode == 0, done.stderr
    assert "taking app-async-echo,app-broken,app-echo,app-slow-retry" in done.stderr
    assert results == [{"echo": {"doc": 7}, "attempt": 1}]


def test_an_apps_async_handler_runs_under_the_cli_beside_its_plain_ones(dsn: str) -> None:
    with pgwork.App(dsn) as app:
        ids = [app.enqueue("app-async-echo", {"doc": 8}), app.enqueue("app-echo", {"doc": 9})]
        done = _burst_cli(dsn, "pgwork_test_appobj:app")
        assert done.returncode == 0, done.stderr
        assert "on threads and an event loop" in done.stderr
        assert [app.wait(i, timeout=5) for i in ids] == [
            {"echo": {"doc": 8}, "attempt": 1, "async": True},
            {"echo": {"doc": 9}, "attempt": 1},
        ]


def test_wait_on_a_job_that_goes_dead_raises_with_its_last_error(dsn: str) -> None:
    with pgwork.App(dsn) as app:
        job_id = app.enqueue("app-broken", {"why": "no pages"}, max_attempts=1)
        assert _burst_cli(dsn, "pgwork_test_appobj:app").returncode == 0
        with pytest.raises(JobFailed) as info:
            app.wait(job_id, timeout=5)
    failed = info.value
    assert (failed.job_id, failed.status, failed.attempts) == (job_id, "dead", 1)
    assert failed.last_error is not None and "broken on purpose: no pages" in failed.last_error
    assert str(failed).startswith(f"job {job_id} is dead after 1 attempt(s): RuntimeError: broken on purpose")


def test_wait_on_a_cancelled_job_raises(dsn: str) -> None:
    with pgwork.App(dsn) as app:
        job_id = app.enqueue("nobody-runs-this", {})
        assert app.cancel([job_id]).cancelled == [job_id]
        with pytest.raises(JobFailed, match="is cancelled"):
            app.wait(job_id, timeout=5)


def test_wait_times_out_with_the_jobs_status(dsn: str) -> None:
    with pgwork.App(dsn) as app:
        job_id = app.enqueue("nobody-runs-this", {})
        started = time.monotonic()
        with pytest.raises(WaitTimeout, match=rf"job {job_id} is still pending after waiting 0.3s") as info:
            app.wait(job_id, timeout=0.3, poll=0.1)
        assert 0.3 <= time.monotonic() - started < 3
        assert isinstance(info.value, TimeoutError)
        with pytest.raises(InvalidArgument, match=r"^job_id: there is no job"):
            app.wait(job_id + 1000, timeout=1)
        with pytest.raises(InvalidArgument, match=r"^timeout: "):
            app.wait(job_id, timeout=-1)


def test_the_completion_wakes_a_waiter_before_its_poll(dsn: str) -> None:
    """With a 30s poll, only the NOTIFY can end the wait in time."""
    with pgwork.App(dsn) as app, pgwork.Queue(dsn) as q:
        job_id = app.enqueue("manual", {})
        [claimed] = q.claim("hand", job_types=["manual"])
        got: list[object] = []
        waiter = threading.Thread(target=lambda: got.append(app.wait(job_id, timeout=20, poll=30)))
        waiter.start()
        # Once the waiter has read the job as pending it is listening (LISTEN comes first).
        wait_for(lambda: waiter_has_read(dsn), what="the waiter's first read")
        finished = time.monotonic()
        q.succeed(claimed.lease, {"by": "hand"})
        waiter.join(20)
        assert got == [{"by": "hand"}]
        assert time.monotonic() - finished < 5
