"""The vacuum horizon in the operator (issue 23): status.vacuumHorizon, the gauges, and one reading
per database per round with a memory of first sightings (QueueCache.horizon)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any, cast

import pytest
from prometheus_client import CollectorRegistry

from pgwork.db import Queue
from pgwork.horizon import Holder, Horizon, HorizonFigures, TableVacuum
from pgwork.operator.db import QueueCache
from pgwork.operator.metrics import OperatorMetrics
from pgwork.operator.vacuum import STATUS_FROM_SECONDS, horizon_status

T0 = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)
SESSION = Holder("session", "42", 42, "report", None, None, None, None, "100", 900, False)


def fig(age: float, *, known: bool = True, holder: Holder | None = SESSION) -> HorizonFigures:
    return HorizonFigures(age, known, 900 if holder else 0, holder, 55, True, False)


@pytest.mark.parametrize(
    ("figures", "age", "holder", "xid_age"),
    [
        (fig(STATUS_FROM_SECONDS - 1), 0, "", 0),  # a moment's snapshot: no status churn
        (fig(STATUS_FROM_SECONDS + 0.4), 60, "session pid 42 (report)", 900),
        (fig(0.0, known=False), 0, "", 0),  # first sighting of a hidden session
        (fig(0.0, holder=None), 0, "", 0),
    ],
)
def test_horizon_status(figures: HorizonFigures, age: int, holder: str, xid_age: int) -> None:
    status = horizon_status(figures)
    assert (status["ageSeconds"], status["holder"], status["xidAge"]) == (age, holder, xid_age)
    assert status["jobsDeadTuples"] == 55 and status["autovacuum"] is True and status["seesEverySession"] is False


def test_gauges() -> None:
    metrics = OperatorMetrics(CollectorRegistry())
    metrics.record_horizon("ns", "q", fig(123.0))
    metrics.record_horizon("ns", "other", None)  # not read: no series
    reg = metrics.registry
    labels = {"namespace": "ns", "jobqueue": "q"}
    assert reg.get_sample_value("pgwork_vacuum_horizon_age_seconds", labels) == 123.0
    assert reg.get_sample_value("pgwork_vacuum_horizon_xid_age", labels) == 900
    assert reg.get_sample_value("pgwork_jobs_dead_tuples", labels) == 55
    assert reg.get_sample_value("pgwork_jobs_autovacuum_enabled", labels) == 1
    assert reg.get_sample_value("pgwork_vacuum_horizon_age_seconds", {"namespace": "ns", "jobqueue": "other"}) is None
    metrics.forget("ns", "q")
    assert reg.get_sample_value("pgwork_vacuum_horizon_age_seconds", labels) is None


class FakeQueue:
    def __init__(self) -> None:
        self.reads = 0
        self.at = T0

    def vacuum_horizon(self) -> Horizon:
        self.reads += 1
        return Horizon((SESSION,), TableVacuum(55, 10, None, None, True, True, False, self.at))


def test_one_reading_per_database_and_a_hidden_session_ages_from_its_first_sighting() -> None:
    cache = QueueCache(factory=lambda dsn: cast(Any, None))
    queue = FakeQueue()
    q = cast(Queue, queue)
    first = cache.horizon("dsn", q, now=100.0, max_age=1.0)
    assert (first.age_known, first.age_seconds) == (True, 0.0)  # first sighting: held since now
    assert cache.horizon("dsn", q, now=100.5, max_age=1.0) is first and queue.reads == 1
    queue.at = T0 + timedelta(seconds=90)
    later = cache.horizon("dsn", q, now=190.0, max_age=1.0)
    assert queue.reads == 2 and later.age_seconds == 90.0
