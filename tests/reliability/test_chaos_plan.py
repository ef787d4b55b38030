"""The injector's schedule and the chaos workload are pure functions of the seed."""

from __future__ import annotations

import itertools

import pytest

from pgwork.errors import PgworkError
from pgwork.tools.chaos import schedule, workload
from pgwork.tools.chaos.harness import Config
from pgwork.tools.chaos.schedule import DATABASE_FAULTS, MIN_RESTART_GAP, FaultKind, plan


@pytest.mark.parametrize(
    ("seed", "duration", "workers", "lease", "per_minute"),
    [
        (7, 45.0, 6, 3.0, 24.0),
        (1, 45.0, 6, 3.0, 24.0),
        (2, 600.0, 8, 3.0, 30.0),
        (3, 20.0, 1, 2.0, 60.0),
        (4, 10.0, 2, 5.0, 6.0),
        (5, 120.0, 3, 1.0, 120.0),
    ],
)
def test_plan_keeps_its_rules(seed: int, duration: float, workers: int, lease: float, per_minute: float) -> None:
    faults = plan(seed, duration=duration, workers=workers, lease=lease, reap_every=0.5, faults_per_minute=per_minute)
    assert faults == plan(
        seed, duration=duration, workers=workers, lease=lease, reap_every=0.5, faults_per_minute=per_minute
    )
    assert faults, "every run gets at least one fault"
    times = [f.at for f in faults]
    assert times == sorted(times) and times[0] >= 2.0 and times[-1] < duration
    assert all(0 <= f.slot < workers for f in faults)
    # The first faults are each kind once, so even short runs exercise every one.
    if len(faults) >= len(FaultKind):
        assert {f.kind for f in faults[: len(FaultKind)]} == set(FaultKind)
    restarts = [f.at for f in faults if f.kind in DATABASE_FAULTS]
    assert all(b - a >= MIN_RESTART_GAP for a, b in itertools.pairwise(restarts))
    for pause in (f for f in faults if f.kind is FaultKind.PAUSE_WORKER):
        # Stopped past the lease plus two reaper rounds: its jobs are reclaimed while it sleeps.
        assert pause.hold > lease + 2 * 0.5
        during = [
            f
            for f in faults
            if f is not pause and f.slot == pause.slot and pause.at <= f.at <= pause.at + pause.hold + 0.5
        ]
        assert all(f.kind in DATABASE_FAULTS for f in during), during
    expected = duration / 60 * per_minute
    assert 0.3 * expected <= len(faults) <= 2.5 * expected + 4


def test_seeds_give_different_plans() -> None:
    plans = {tuple(plan(s, duration=60, workers=4, lease=3, reap_every=0.5)) for s in range(10)}
    assert len(plans) == 10


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"duration": 0, "workers": 1, "lease": 1, "reap_every": 1}, "positive"),
        ({"duration": 10, "workers": 0, "lease": 1, "reap_every": 1}, "positive"),
        ({"duration": 10, "workers": 1, "lease": 0, "reap_every": 1}, "positive"),
    ],
)
def test_plan_refuses_nonsense(kwargs: dict[str, float], fragment: str) -> None:
    with pytest.raises(ValueError, match=fragment):
        plan(1, **kwargs)  # type: ignore[arg-type]


def test_counts_tally_each_kind() -> None:
    faults = plan(7, duration=45, workers=6, lease=3, reap_every=0.5, faults_per_minute=24)
    counted = schedule.counts(faults)
    assert sum(counted.values()) == len(faults) and all(counted[k] >= 1 for k in FaultKind)


def test_workload_is_seeded_and_mixed() -> None:
    jobs = workload.jobs(7, 2000, spread=36.0, lease=3.0)
    assert jobs == workload.jobs(7, 2000, spread=36.0, lease=3.0)
    assert jobs != workload.jobs(8, 2000, spread=36.0, lease=3.0)
    assert len({j.key for j in jobs}) == 2000
    delays = [j.delay or 0.0 for j in jobs]
    assert delays == sorted(delays) and delays[0] == 0 and delays[-1] < 36.0
    long = [j for j in jobs if j.payload["ms"] > 3000]
    permanent = [j for j in jobs if j.payload.get("permanent")]
    flaky = [j for j in jobs if j.payload.get("flaky")]
    assert 10 <= len(long) <= 80 and 10 <= len(permanent) <= 80 and 100 <= len(flaky) <= 300


@pytest.mark.parametrize(
    ("changes", "fragment"),
    [
        ({"jobs": 0}, "--jobs"),
        ({"workers": 65}, "--workers"),
        ({"duration": 0}, "--duration"),
        ({"lease": 0.5}, "--lease/--heartbeat"),
        ({"lease": 3.0, "heartbeat": 1.5}, "--lease/--heartbeat"),
        ({"faults_per_minute": 0}, "--faults-per-minute"),
    ],
)
def test_chaos_config_refuses_nonsense(changes: dict[str, float], fragment: str) -> None:
    Config().check()
    with pytest.raises(PgworkError, match=fragment):
        Config(**changes).check()  # type: ignore[arg-type]
