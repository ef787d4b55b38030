"""A lock holder cannot freeze other workers (issue 24, class 3): a session that holds a limit
row inside an open transaction (a claim it never committed) makes other claims skip that type
within milliseconds, take the others, and report the skip, instead of waiting on it forever."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime

import psycopg
import pytest

from pgwork.db import Queue
from pgwork.models import ClaimedJob, NewJob

T0 = datetime(2030, 1, 1, tzinfo=UTC)


@pytest.fixture
def holder(dsn: str, queue: Queue) -> Iterator[psycopg.Connection]:
    """A second session that claimed a limited `gpu` job in a transaction it leaves open: it holds
    gpu's limit row until the test ends."""
    queue.enqueue_many([NewJob(t, {"n": i}) for i in range(3) for t in ("gpu", "cpu")], now=T0)
    queue.set_limit("gpu", max_running=10, now=T0)
    with psycopg.connect(dsn) as conn:
        rows = conn.execute("SELECT id FROM pgwork.claim('hostile', ARRAY['gpu'], 1, 30, %s)", (T0,)).fetchall()
        assert len(rows) == 1
        yield conn
        conn.rollback()


def _bounded(call: Callable[[], list[ClaimedJob]], seconds: float = 10.0) -> tuple[list[ClaimedJob], float]:
    """`call()` in a thread: a claim that waits on the lock would hang the test, not fail it."""
    result: list[list[ClaimedJob]] = []
    started = time.perf_counter()
    thread = threading.Thread(target=lambda: result.append(call()), daemon=True)
    thread.start()
    thread.join(seconds)
    assert result, f"the claim waited more than {seconds}s on another session's lock"
    return result[0], time.perf_counter() - started


@pytest.mark.parametrize("job_types", [["gpu", "cpu"], None], ids=["named types", "any type"])
def test_a_claim_skips_a_limited_type_whose_row_another_session_holds(
    queue: Queue, holder: psycopg.Connection, job_types: list[str] | None
) -> None:
    skipped: list[str] = []
    queue.on_limit_skipped(skipped.append)
    claimed, seconds = _bounded(lambda: queue.claim("w", job_types=job_types, limit=10, now=T0))
    assert sorted(j.job_type for j in claimed) == ["cpu"] * 3
    assert skipped == ["gpu"]
    assert seconds < 1.0  # 5 ms of lock wait plus the claim; generous for a loaded test machine
    # Only gpu is held: a claim for it alone returns nothing at once, and counts again.
    only, _ = _bounded(lambda: queue.claim("w", job_types=["gpu"], limit=10, now=T0))
    assert only == [] and skipped == ["gpu", "gpu"]


def test_the_type_is_claimed_again_once_the_holder_lets_go(queue: Queue, holder: psycopg.Connection) -> None:
    assert queue.claim("w", job_types=["gpu"], limit=10, now=T0) == []
    holder.rollback()
    assert [j.job_type for j in queue.claim("w", job_types=["gpu"], limit=10, now=T0)] == ["gpu"] * 3


def test_the_callers_lock_timeout_is_kept(dsn: str, queue: Queue, holder: psycopg.Connection) -> None:
    with psycopg.connect(dsn) as conn:
        conn.execute("SET LOCAL lock_timeout = '3s'")
        assert queue.claim("w", job_types=["cpu"], limit=1, now=T0, conn=conn)
        assert queue.claim("w", job_types=["gpu"], limit=1, now=T0, conn=conn) == []
        assert conn.execute("SHOW lock_timeout").fetchone() == ("3s",)


def test_an_unheld_limit_row_is_waited_for_as_before(queue: Queue) -> None:
    """No holder: nothing is skipped and nothing is reported."""
    queue.enqueue_many([NewJob("gpu", {}), NewJob("cpu", {})], now=T0)
    queue.set_limit("gpu", max_running=1, now=T0)
    skipped: list[str] = []
    queue.on_limit_skipped(skipped.append)
    assert sorted(j.job_type for j in queue.claim("w", limit=10, now=T0)) == ["cpu", "gpu"]
    assert skipped == []
