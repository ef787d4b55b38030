"""The scaling decision, as a table: figures and `now` in, replicas out."""

from __future__ import annotations

import pytest

from pgwork.operator.scaling import LimitedWork, ScaleMemory, decide, per_worker, recommend, workers_for_work
from pgwork.operator.spec import ScalingSpec


def policy(min_: int = 1, max_: int = 10, target: int = 5, activation: int = 0, window: float = 300.0) -> ScalingSpec:
    return ScalingSpec(min_, max_, target, activation, window, 10.0)


@pytest.mark.parametrize(
    ("p", "ready", "running", "current", "expected"),
    [
        (policy(), 0, 0, 1, 1),  # floor at min
        (policy(), 50, 0, 1, 10),  # ceil(50/5)
        (policy(), 51, 0, 1, 10),  # capped at max
        (policy(max_=100), 51, 0, 1, 11),  # ceil rounds up
        (policy(), 3, 4, 1, 2),  # running counts too
        (policy(min_=0), 0, 0, 0, 0),  # idle at zero stays at zero
        (policy(min_=0, activation=10), 10, 0, 0, 0),  # not above the activation threshold
        (policy(min_=0, activation=10), 11, 0, 0, 3),  # above it: wake up
        (policy(min_=0, activation=10), 3, 0, 1, 1),  # activation only gates waking from zero
        (policy(min_=0, activation=10), 0, 2, 0, 1),  # something runs: never zero
        (policy(min_=2), 0, 0, 0, 2),
    ],
)
def test_recommend(p: ScalingSpec, ready: int, running: int, current: int, expected: int) -> None:
    assert recommend(p, ready, running, current) == expected


def test_scales_up_at_once() -> None:
    d = decide(policy(), ready=40, running=0, current=2, now=0.0)
    assert (d.desired, d.reason) == (8, "ScaledUp")
    assert d.changes(2)


def test_scales_down_only_after_the_window_and_to_its_highest_recommendation() -> None:
    p = policy(window=60.0)
    memory = ScaleMemory()
    rounds = [  # (now, ready, expected desired, reason)
        (0.0, 40, 8, "ScaledUp"),
        (10.0, 20, 8, "Stabilizing"),  # wants 4, watched only 10s
        (30.0, 0, 8, "Stabilizing"),  # wants 1
        (61.0, 0, 4, "ScaledDown"),  # window (1s..61s] saw 4 at t=10 → go to 4, not 1
        (75.0, 0, 1, "ScaledDown"),  # t=10's 4 has left the window
        (80.0, 0, 1, "Steady"),
    ]
    current = 2
    for now, ready, expected, reason in rounds:
        d = decide(p, ready=ready, running=0, current=current, now=now, memory=memory)
        assert (now, d.desired, d.reason) == (now, expected, reason)
        memory, current = d.memory, d.desired


def test_a_fresh_operator_waits_a_full_window_before_scaling_down() -> None:
    d = decide(policy(window=60.0), ready=0, running=0, current=5, now=1000.0)
    assert (d.desired, d.reason) == (5, "Stabilizing")
    d = decide(policy(window=60.0), ready=0, running=0, current=5, now=1060.0, memory=d.memory)
    assert (d.desired, d.reason) == (1, "ScaledDown")


def test_a_lowered_max_applies_at_once() -> None:
    d = decide(policy(max_=4), ready=100, running=0, current=9, now=0.0)
    assert (d.desired, d.reason) == (4, "ScaledDown")


def test_a_raised_min_applies_at_once() -> None:
    d = decide(policy(min_=3), ready=0, running=0, current=1, now=0.0)
    assert (d.desired, d.reason) == (3, "ScaledUp")


@pytest.mark.parametrize(("external", "expected"), [(4, 4), (0, 1), (50, 10)])
def test_external_replicas_are_followed_within_bounds(external: int, expected: int) -> None:
    d = decide(policy(), ready=1000, running=0, current=2, now=0.0, external=external)
    assert d.desired == expected
    assert d.reason in ("External", "Steady")


def test_zero_window_scales_down_at_once() -> None:
    d = decide(policy(window=0.0), ready=0, running=0, current=6, now=5.0)
    assert (d.desired, d.reason) == (1, "ScaledDown")


@pytest.mark.parametrize(
    ("poll", "failures", "expected"),
    [(10.0, 1, 10.0), (10.0, 2, 20.0), (10.0, 5, 160.0), (10.0, 6, 300.0), (0.2, 3, 0.8), (10.0, 99, 300.0)],
)
def test_retry_delay_after_database_failures(poll: float, failures: int, expected: float) -> None:
    from pgwork.operator.controller import retry_delay

    assert retry_delay(poll, failures) == pytest.approx(expected)


def lw(job_type: str, ready: int, running: int, max_running: int | None = None, rate: int | None = None) -> LimitedWork:
    return LimitedWork(job_type, ready, running, max_running, rate)


@pytest.mark.parametrize(
    ("target", "capacity", "ready", "running", "limited", "expected"),
    [
        # The case: max_running 4, 2 jobs per worker → never more than 2 workers, whatever the backlog.
        (1, 2, 10_000, 4, [lw("gpu", 10_000, 4, max_running=4)], 2),
        (1, 2, 10_000, 0, [lw("gpu", 10_000, 0, max_running=4)], 2),
        (5, 2, 10_000, 4, [lw("gpu", 10_000, 4, max_running=4)], 1),  # the target asks for fewer still
        (1, 1, 10_000, 4, [lw("gpu", 10_000, 4, max_running=4)], 4),
        (1, 3, 10_000, 4, [lw("gpu", 10_000, 4, max_running=4)], 2),  # ceil(4 / 3)
        (1, 2, 1, 0, [lw("gpu", 1, 0, max_running=4)], 1),  # less work than the limit: the work decides
        # The unlimited types beside it scale as before; the limited type adds only what it can use.
        (10, 2, 10_000 + 95, 4, [lw("gpu", 10_000, 4, max_running=4)], 10 + 1),
        # A rate: ready jobs past one period's claims cannot start yet.
        (10, 4, 5_000, 0, [lw("llm", 5_000, 0, rate=60)], 6),
        (10, 4, 5_000, 30, [lw("llm", 5_000, 30, rate=60)], 9),  # running jobs are real work
        (10, 4, 5_000, 30, [lw("llm", 5_000, 30, max_running=8, rate=60)], 1),
        # No limit: exactly the old rule.
        (5, 2, 50, 0, [], 10),
    ],
)
def test_limits_cap_the_workers_a_type_asks_for(
    target: int, capacity: int, ready: int, running: int, limited: list[LimitedWork], expected: int
) -> None:
    assert workers_for_work(target, ready, running, limited, capacity) == expected
    p = policy(max_=100, target=target)
    assert recommend(p, ready, running, 1, limited=limited, capacity=capacity) == max(expected, 1)


def test_a_limited_backlog_does_not_scale_up_and_the_message_says_why() -> None:
    limited = (lw("gpu", 10_000, 4, max_running=4),)
    d = decide(policy(max_=50, target=1), ready=10_000, running=4, current=2, now=0.0, limited=limited, capacity=2)
    assert (d.desired, d.reason) == (2, "Steady")
    assert "gpu max 4 running" in d.message


@pytest.mark.parametrize(
    ("concurrency", "batch", "target", "ready", "running", "expected"),
    [
        # batch 1: capacity is concurrency, and a target at or above it counts as before.
        (1, 1, 5, 50, 0, 10),
        (4, 1, 8, 50, 14, 8),
        # A batch worker takes concurrency * batch jobs at once: one pod holding its own batch of 64
        # asks for one pod, not ceil(64 / 5) = 13 GPU pods.
        (1, 64, 5, 0, 64, 1),
        (2, 32, 5, 0, 64, 1),
        (2, 32, 5, 640, 64, 11),  # ceil(704 / 64)
        (2, 32, 5, 1, 64, 2),  # one job past a full pod asks for a second
        # A target above the capacity still decides: queue that many per pod.
        (1, 32, 128, 1_000, 0, 8),
        # Plain handlers with a target below concurrency: the capacity is the floor too.
        (8, 1, 2, 0, 8, 1),
        (8, 1, 2, 9, 8, 3),
    ],
)
def test_workers_are_counted_by_capacity(
    concurrency: int, batch: int, target: int, ready: int, running: int, expected: int
) -> None:
    capacity = concurrency * batch
    assert workers_for_work(target, ready, running, (), capacity) == expected
    assert recommend(policy(max_=100, target=target), ready, running, 1, capacity=capacity) == expected


@pytest.mark.parametrize(("target", "capacity", "expected"), [(5, 1, 5), (5, 64, 64), (128, 64, 128), (1, 0, 1)])
def test_per_worker_is_the_target_never_below_the_capacity(target: int, capacity: int, expected: int) -> None:
    assert per_worker(target, capacity) == expected


def test_a_limited_type_asks_for_the_fewest_pods_of_its_capacity() -> None:
    # max_running 128 on pods of 2 * 32: two pods hold every job the limit lets run.
    limited = [lw("embed", 10_000, 0, max_running=128)]
    assert workers_for_work(1, 10_000, 0, limited, capacity=64) == 2


def test_the_message_says_when_the_capacity_decides() -> None:
    d = decide(policy(max_=50, target=5), ready=0, running=64, current=1, now=0.0, capacity=64)
    assert (d.desired, d.reason) == (1, "Steady")
    assert "counted as 64/worker" in d.message
    plain = decide(policy(max_=50, target=5), ready=0, running=4, current=1, now=0.0)
    assert "counted as" not in plain.message
