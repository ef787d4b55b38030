"""The pure decisions of hard timeouts, as tables (no database, no sleeping): which timeout
applies, when the watchdog tells and abandons, what the error says, what an abandoned attempt
writes, when a worker gives up; and the watchdog's round with a clock passed in."""

from __future__ import annotations

import threading
import time
import uuid
from datetime import UTC, datetime

import pytest

from pgwork.durations import format_duration, parse_duration
from pgwork.models import ClaimedJob, Lease
from pgwork.worker.attempt import Attempt, AttemptState
from pgwork.worker.holdings import Holdings
from pgwork.worker.job import Job, StopReason
from pgwork.worker.options import OptionError, parse_options
from pgwork.worker.outcome import Decision, Ended, Outcome, abandoned, decide, timeout_message
from pgwork.worker.registry import Registry
from pgwork.worker.runners import Runners
from pgwork.worker.timeouts import (
    Step,
    Watchdog,
    abandon_grace,
    effective_timeout,
    next_step,
    too_many_abandoned,
    wake_at,
)
from tests.support.waiting import wait_for

NOW = datetime(2026, 12, 3, tzinfo=UTC)


@pytest.mark.parametrize(
    ("job", "handler", "expected"),
    [(None, None, None), (None, 60.0, 60.0), (5.0, 60.0, 5.0), (600.0, 60.0, 600.0), (5.0, None, 5.0)],
)
def test_effective_timeout(job: float | None, handler: float | None, expected: float | None) -> None:
    assert effective_timeout(job, handler) == expected


@pytest.mark.parametrize(("timeout", "grace"), [(0.1, 0.5), (1, 0.5), (10, 1.0), (30, 3.0), (600, 5.0), (86400, 5.0)])
def test_abandon_grace(timeout: float, grace: float) -> None:
    assert abandon_grace(timeout) == grace


@pytest.mark.parametrize(
    ("now", "told", "step"),
    [
        (99.0, False, Step.WAIT),  # before the deadline (100)
        (100.0, False, Step.TELL),  # at it
        (100.5, True, Step.WAIT),  # told; the grace (1s for a 10s timeout) runs
        (101.0, True, Step.ABANDON),  # grace over
        (500.0, False, Step.TELL),  # late round: still tell first, never abandon untold
    ],
)
def test_next_step(now: float, told: bool, step: Step) -> None:
    assert next_step(now, 100.0, 10.0, told=told) is step


def test_wake_at() -> None:
    assert wake_at(100.0, 10.0, told=False) == 100.0
    assert wake_at(100.0, 10.0, told=True) == 101.0


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(600, "10m"), (5400, "1h30m"), (1.5, "1.5s"), (0.25, "250ms"), (1, "1s"), (90061, "1d1h1m1s"), (604800, "7d")],
)
def test_format_duration_reads_back(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text
    assert parse_duration(text) == pytest.approx(seconds)


def test_timeout_message() -> None:
    assert timeout_message(600, returned=False) == "timed out after 10m (handler did not return)"
    assert timeout_message(0.5, returned=True).startswith("timed out after 500ms (the handler stopped when told")


@pytest.mark.parametrize(("count", "limit", "over"), [(0, 0, False), (1, 0, True), (3, 3, False), (4, 3, True)])
def test_too_many_abandoned(count: int, limit: int, over: bool) -> None:
    assert too_many_abandoned(count, limit) is over


def _decide(stop: StopReason | None, attempt: int = 1, ended: Ended | None = None) -> Decision:
    return decide(
        ended or Ended(value="ignored"),
        stop,
        released=False,
        attempt=attempt,
        max_attempts=3,
        backoff=7.0,
        now=NOW,
        timeout=60.0,
    )


@pytest.mark.parametrize(
    ("stop", "attempt", "outcome", "error"),
    [
        (StopReason.TIMED_OUT, 1, Outcome.RETRY, "timed out after 1m (the handler stopped when told"),
        (StopReason.TIMED_OUT, 3, Outcome.DEAD, "timed out after 1m"),
        (StopReason.CANCELLED, 1, Outcome.CANCELLED, None),
        (None, 1, Outcome.SUCCEEDED, None),
    ],
)
def test_decide_after_a_timeout(stop: StopReason | None, attempt: int, outcome: Outcome, error: str | None) -> None:
    decision = _decide(stop, attempt)
    assert decision.outcome is outcome
    if error is not None:
        assert decision.error is not None and decision.error.startswith(error)
        assert decision.error_type == "timed_out"
    if outcome is Outcome.RETRY:
        assert decision.failure is not None and decision.failure.retry_delay == 7.0


def test_a_handler_that_raises_when_told_to_stop_is_still_a_timeout() -> None:
    decision = _decide(StopReason.TIMED_OUT, ended=Ended(error=RuntimeError("interrupted")))
    assert decision.outcome is Outcome.RETRY and decision.error is not None and "timed out" in decision.error


@pytest.mark.parametrize(
    ("stop", "attempt", "outcome"),
    [
        (StopReason.TIMED_OUT, 1, Outcome.RETRY),
        (StopReason.TIMED_OUT, 3, Outcome.DEAD),
        (StopReason.CANCELLED, 1, Outcome.CANCELLED),  # asked for first: still cancelled
        (StopReason.LEASE_LOST, 1, Outcome.LEASE_LOST),  # nothing to write
    ],
)
def test_what_an_abandoned_attempt_writes(stop: StopReason, attempt: int, outcome: Outcome) -> None:
    decision = abandoned(stop, 600.0, attempt=attempt, max_attempts=3, backoff=7.0, now=NOW)
    assert decision.outcome is outcome
    if outcome in (Outcome.RETRY, Outcome.DEAD):
        assert decision.error == "timed out after 10m (handler did not return)"


@pytest.mark.parametrize(
    ("value", "problem"), [("0", "is not a duration above zero"), ("8d", "more than 7 days"), ("x", "not a duration")]
)
def test_a_bad_handler_timeout_is_refused_at_registration(value: str, problem: str) -> None:
    with pytest.raises(ValueError, match=f"timeout: .*{problem}"):
        Registry().register("ocr", lambda job: None, timeout=value)


@pytest.mark.parametrize(("value", "ok"), [("0", True), ("3", True), ("1000", True), ("-1", False), ("x", False)])
def test_max_abandoned_option(value: str, ok: bool) -> None:
    if ok:
        assert parse_options(app="m", worker_id="w", environ={}, max_abandoned=value).max_abandoned == int(value)
    else:
        with pytest.raises(OptionError, match="--max-abandoned"):
            parse_options(app="m", worker_id="w", environ={}, max_abandoned=value)


def _held(job_id: int, timeout: float | None, deadline: float | None) -> Attempt:
    lease = Lease(job_id, uuid.uuid4(), "w", 1, 3, "ocr")
    claimed = ClaimedJob(job_id, "ocr", {}, 100, 1, 3, "k", {}, lease, NOW, NOW, None, timeout)
    held = Attempt(claimed, Job(job_id, "ocr", {}, 1, 3, "k"), 30.0)
    held.state = AttemptState.RUNNING
    held.timeout, held.deadline = timeout, deadline
    return held


def test_the_watchdog_tells_then_abandons_on_its_clock() -> None:
    holdings = Holdings()
    slow, untimed = _held(1, 10.0, 100.0), _held(2, None, None)
    holdings.add(slow)
    holdings.add(untimed)
    told: list[int] = []
    dropped: list[int] = []
    dog = Watchdog(holdings, lambda h: told.append(h.claimed.id), lambda h: dropped.append(h.claimed.id))
    assert dog.check(99.0) == 99.25  # nothing due; looks again within POLL
    assert dog.check(100.0) == 100.25 and told == [1] and slow.told
    assert dog.check(100.9) == pytest.approx(101.0) and dropped == []  # in its grace: wake at its end
    dog.check(101.0)
    assert dropped == [1] and told == [1]


def test_an_abandoned_runner_is_replaced_and_ends_when_its_handler_returns() -> None:
    release = threading.Event()
    started = threading.Event()
    ran: list[int] = []

    def run(held: Attempt) -> None:
        held.runner = threading.current_thread()
        if held.claimed.id == 1:
            started.set()
            release.wait(10)
        ran.append(held.claimed.id)

    pool = Runners(1)
    pool.start(run)
    stuck = _held(1, 1.0, 0.0)
    pool.submit(stuck)
    wait_for(started.is_set, 5)
    assert stuck.runner is not None and pool.abandon(stuck.runner)
    assert not pool.abandon(stuck.runner)  # once
    assert pool.abandoned == 1 and pool.busy == 0
    pool.submit(_held(2, None, None))
    wait_for(lambda: ran == [2], 5, what="the replacement ran the next job")
    release.set()
    wait_for(lambda: pool.abandoned == 0, 5, what="the abandoned thread ended")
    assert ran == [2, 1] and stuck.runner is not None
    stuck.runner.join(5)
    assert not stuck.runner.is_alive()  # it ended instead of taking another job
    pool.stop()


def test_runners_keep_the_bound_when_a_runner_takes_its_next_job_itself() -> None:
    # A runner that frees its slot runs the next queued job itself: every job runs once, never
    # more than `count` at once, and `idle` is told once the last slot frees.
    lock = threading.Lock()
    started: list[int] = []
    now_running = [0, 0]  # current, most seen
    idle = threading.Event()

    def run(held: Attempt) -> None:
        with lock:
            started.append(held.claimed.id)
            now_running[0] += 1
            now_running[1] = max(now_running[1], now_running[0])
        time.sleep(0.001)
        with lock:
            now_running[0] -= 1

    pool = Runners(3)
    pool.start(run, idle=idle.set)
    pool.submit_many([_held(n, None, None) for n in range(1, 61)])
    wait_for(lambda: len(started) == 60 and pool.busy == 0, 10, what="every job ran")
    assert idle.is_set()
    assert now_running[1] <= 3 and sorted(started) == list(range(1, 61))
    assert started[0] in (1, 2, 3)  # taken from the head of the queue: the claim's order
    pool.stop()
