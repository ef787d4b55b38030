"""The mvcc experiment's pure parts (issue 23): its settings, windows, recovery and figures."""

from __future__ import annotations

import math

import pytest

from pgwork.tools.lab.mvcc import Plan, Timeline, configured, figures, last_sample, recovery, runs_between, windows

BASE = Plan(500, 30, 600, 120, 60)


def test_configured_applies_the_pairs() -> None:
    p = configured(BASE, "rate=150, hold=150,recover=60,bucket=30,workers=3,cases=ba")
    assert (p.rate, p.hold, p.recover, p.bucket, p.workers, p.cases, p.warm) == (150, 150, 60, 30, 3, ("b", "a"), 30)
    assert configured(BASE, "") == BASE
    assert configured(BASE, "solo=1").solo and not configured(BASE, "solo=0").solo


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("speed=3", "unknown setting 'speed'"),
        ("rate=fast", "rate='fast' is not a number"),
        ("hold=0", "hold must be a positive number"),
        ("cases=xyz", "unknown setting 'cases'"),
        ("solo=yes", "unknown setting 'solo'"),
    ],
)
def test_configured_refuses_bad_pairs(text: str, says: str) -> None:
    with pytest.raises(ValueError, match="PGWORK_LAB_MVCC") as err:
        configured(BASE, text)
    assert says in str(err.value)


def test_windows_put_a_short_remainder_in_the_last() -> None:
    claims = [(100.0, 1.0), (104.9, 2.0), (105.0, 3.0), (110.2, 4.0), (99.0, 9.0), (111.0, 9.0)]
    assert windows(claims, 100.0, 110.3, 5.0) == [[1.0, 2.0], [3.0, 4.0]]
    assert windows(claims, 100.0, 100.0, 5.0) == []


def test_last_sample_and_recovery() -> None:
    samples = [(100.0, "pgwork", 900, 10), (105.0, "pgwork", 400, 20), (110.0, "pgwork", 50, 30), (110.0, "x", 0, 0)]
    assert last_sample(samples, "pgwork", 106.0) == (400, 20)
    assert last_sample(samples, "pgwork", 99.0) == (None, 0)
    # Slow at first, then within 1.25x of 1 ms with the backlog (sampled at 110) under the rate of 100.
    claims = [(101.0, 5.0), (102.0, 5.0), (106.0, 1.1), (107.0, 1.2)]
    assert recovery(claims, samples, system="pgwork", fresh_p50=1.0, release=100.0, end=115.0, rate=100) == 5.0
    assert math.isnan(recovery(claims, samples, system="pgwork", fresh_p50=0.5, release=100.0, end=115.0, rate=100))


def test_figures_per_bucket_and_summary() -> None:
    p = Plan(100, 10, 20, 10, 10)
    line = Timeline(
        hold_at=100.0,
        release_at=120.0,
        samples=[(110.0, "pgwork", 5, 100), (120.0, "pgwork", 7, 200)],
        vacuums=[(99.0, 4), (105.0, 5), (110.2, 7), (116.0, 7), (120.3, 8)],
    )
    claims = {"pgwork": [(95.0, 1.0), (105.0, 2.0), (115.0, 4.0), (125.0, 1.0)]}
    got = {(m.series, m.x, m.metric): m.value for m in figures(p, "b", line, claims, {"pgwork": 3000})}
    assert got[("pgwork, case b", "10 s", "claim p50")] == 2.0
    assert got[("pgwork, case b", "20 s", "claim p50")] == 4.0
    assert got[("pgwork, case b", "20 s", "backlog")] == 7
    assert got[("pgwork, case b", "20 s", "dead tuples")] == 200
    assert got[("pgwork, case b", "10 s", "autovacuums")] == 3  # 4 before the bucket, 7 by its end
    assert got[("pgwork, case b", "20 s", "autovacuums")] == 1
    assert got[("pgwork, case b", "summary", "last / warm-up")] == 4.0
    assert got[("pgwork, case b", "summary", "recovery")] == 5.0  # the first 5 s window after it is empty


@pytest.mark.parametrize(
    ("vacuums", "start", "stop", "runs"),
    [
        ([], 0.0, 10.0, 0),
        ([(1.0, 3)], 0.0, 10.0, 0),  # one sample inside: nothing to count from
        ([(-1.0, 2), (5.0, 3), (9.0, 6)], 0.0, 10.0, 4),
        ([(-1.0, 2), (11.0, 9)], 0.0, 10.0, 0),  # the later sample falls in the next bucket
    ],
)
def test_runs_between(vacuums: list[tuple[float, int]], start: float, stop: float, runs: int) -> None:
    assert runs_between(vacuums, start, stop) == runs
