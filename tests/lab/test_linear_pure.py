"""The fleet-linear experiment's pure parts: reading the workers' claim histograms."""

from __future__ import annotations

import math

import pytest
from prometheus_client import CollectorRegistry, Histogram, generate_latest

from pgwork.tools.lab.linear import (
    CLAIM_HISTOGRAM,
    Buckets,
    Plan,
    add,
    bucket_quantile,
    linear_seconds,
    parse_claim_buckets,
    share_at_most,
    subtract,
)
from pgwork.worker.metrics import CLAIM_BUCKETS

INF = float("inf")
# 10 observations: 4 under 0.5 ms, 4 more under 1 ms, 2 under 2.5 ms.
H: Buckets = [(0.0005, 4.0), (0.001, 8.0), (0.0025, 10.0), (INF, 10.0)]


@pytest.mark.parametrize(
    ("buckets", "q", "expected"),
    [
        (H, 0.5, 0.0005 + 0.0005 * (5 - 4) / 4),  # inside the second bucket
        (H, 0.4, 0.0005),  # exactly the first bucket's bound
        (H, 0.1, 0.0005 * 1 / 4),  # inside the first bucket, from zero
        (H, 0.99, 0.001 + 0.0015 * (9.9 - 8) / 2),
        ([(0.001, 0.0), (INF, 5.0)], 0.5, 0.001),  # all above the largest bound: that bound
        ([(0.001, 0.0), (INF, 0.0)], 0.5, math.nan),  # nothing observed
        ([], 0.5, math.nan),
    ],
    ids=["median", "at a bound", "first bucket", "p99", "overflow", "empty", "no buckets"],
)
def test_bucket_quantile(buckets: Buckets, q: float, expected: float) -> None:
    got = bucket_quantile(buckets, q)
    assert (math.isnan(got) and math.isnan(expected)) or got == pytest.approx(expected)


@pytest.mark.parametrize("q", [0.0, 1.0, -0.1, 1.5])
def test_bucket_quantile_refuses_q_outside_the_open_interval(q: float) -> None:
    with pytest.raises(ValueError, match="q must be within"):
        bucket_quantile(H, q)


def test_share_at_most_a_bound_is_exact_and_other_values_are_refused() -> None:
    assert share_at_most(H, 0.001) == 0.8
    assert share_at_most(H, 0.0005) == 0.4
    with pytest.raises(ValueError, match="not a bucket bound"):
        share_at_most(H, 0.0007)


def test_a_round_is_the_difference_of_two_scrapes_summed_over_workers() -> None:
    before: Buckets = [(0.0005, 1.0), (0.001, 2.0), (INF, 3.0)]
    after: Buckets = [(0.0005, 3.0), (0.001, 6.0), (INF, 7.0)]
    one = subtract(after, before)
    assert one == [(0.0005, 2.0), (0.001, 4.0), (INF, 4.0)]
    assert add([one, one]) == [(0.0005, 4.0), (0.001, 8.0), (INF, 8.0)]


def test_parse_reads_the_workers_own_histogram() -> None:
    registry = CollectorRegistry()
    h = Histogram(CLAIM_HISTOGRAM, "claims", buckets=CLAIM_BUCKETS, registry=registry)
    for seconds in (0.0004, 0.0009, 0.0009, 0.003):
        h.observe(seconds)
    buckets = parse_claim_buckets(generate_latest(registry).decode())
    assert buckets[-1] == (INF, 4.0)
    assert share_at_most(buckets, 0.001) == 0.75
    assert [b for b, _ in buckets][:-1] == list(CLAIM_BUCKETS)
    with pytest.raises(ValueError, match="no pgwork_claim_duration_seconds"):
        parse_claim_buckets("# nothing here\n")


def test_linear_is_every_worker_busy_from_the_insert() -> None:
    assert linear_seconds(Plan(workers=16, jobs=400, job_seconds=0.2, rounds=3)) == pytest.approx(5.0)
