"""Metrics stay bounded whatever producers do (issue 24, class 7): a worker serving thousands of
job types exports at most MAX_TYPE_LABELS of them by name, the rest under one OTHER_TYPE label."""

from __future__ import annotations

from prometheus_client import generate_latest

from pgwork.worker.holdings import Holdings
from pgwork.worker.metrics import MAX_TYPE_LABELS, OTHER_TYPE, WorkerMetrics


def _series(metrics: WorkerMetrics) -> int:
    return sum(len(family.samples) for family in metrics.registry.collect())


def _job_types(metrics: WorkerMetrics) -> set[str]:
    return {
        s.labels["job_type"] for family in metrics.registry.collect() for s in family.samples if "job_type" in s.labels
    }


def test_ten_thousand_types_export_no_more_series_than_the_cap_allows() -> None:
    one = WorkerMetrics()
    one.watch(Holdings(), ["t0"])
    per_type = _series(one) - _series(WorkerMetrics())  # what one watched type adds
    many = WorkerMetrics()
    many.watch(Holdings(), [f"t{i}" for i in range(10_000)])
    assert _job_types(many) == {f"t{i}" for i in range(MAX_TYPE_LABELS)} | {OTHER_TYPE}
    bound = _series(WorkerMetrics()) + (MAX_TYPE_LABELS + 1) * per_type
    assert _series(many) <= bound
    page = generate_latest(many.registry)
    assert len(page) < 2_000_000, len(page)  # was 136 MB at 10,000 types


def test_types_past_the_cap_are_counted_under_other() -> None:
    metrics = WorkerMetrics()
    types = [f"t{i}" for i in range(MAX_TYPE_LABELS + 5)]
    metrics.watch(Holdings(), types)
    metrics.finished(types[-1], "succeeded", 0.5)
    metrics.finished(types[-2], "dead", 0.5)
    metrics.finished(types[0], "succeeded", 0.5)
    metrics.claim_skipped("never-watched")  # a claim for any type may report one the worker never saw
    get = metrics.registry.get_sample_value
    assert get("pgwork_jobs_finished_total", {"job_type": OTHER_TYPE, "outcome": "succeeded"}) == 1
    assert get("pgwork_jobs_finished_total", {"job_type": OTHER_TYPE, "outcome": "dead"}) == 1
    assert get("pgwork_jobs_finished_total", {"job_type": "t0", "outcome": "succeeded"}) == 1
    assert get("pgwork_claim_limit_skipped_total", {"job_type": OTHER_TYPE}) == 1
    assert len(_job_types(metrics)) == MAX_TYPE_LABELS + 1


def test_a_few_types_keep_their_own_names() -> None:
    metrics = WorkerMetrics()
    metrics.watch(Holdings(), ["ocr", "mail"])
    metrics.finished("ocr", "succeeded", 1.0)
    assert _job_types(metrics) == {"ocr", "mail"}
