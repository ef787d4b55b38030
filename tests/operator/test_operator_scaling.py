"""The scaling decision, as a table: figures and `now` in, replicas out."""

from __future__ import annotations

import pytest

from pgwork.operator.scaling import ScaleMemory, decide, recommend
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
