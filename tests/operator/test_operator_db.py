"""The operator's database edge against a real PostgreSQL: shared Queues, shared readings,
and failures turned into condition reasons without passwords."""

from __future__ import annotations

import psycopg.conninfo
import pytest

from pgwork.db import Queue
from pgwork.limits import Rate
from pgwork.models import NewJob
from pgwork.operator.db import DatabaseProblem, QueueCache, jobs_by_owner, sum_backlog
from pgwork.operator.metrics import OperatorMetrics
from pgwork.operator.scaling import LimitedWork, recommend
from pgwork.operator.spec import ScalingSpec


def test_backlog_sums_only_the_queues_job_types_and_share_one_reading(dsn: str, queue: Queue) -> None:
    queue.enqueue_many([NewJob("ocr", {"n": n}) for n in range(4)] + [NewJob("other", {"n": n}) for n in range(7)])
    queue.enqueue("extract", {"later": True}, delay=3600)
    queue.claim("pod-a", job_types=["ocr"], limit=1)
    cache = QueueCache()
    try:
        q = cache.get(("ns", "a"), dsn)
        assert cache.get(("ns", "b"), dsn) is q  # one Queue per database
        first = cache.backlog(dsn, q, ["ocr", "extract"], now=100.0, max_age=1.0)
        assert (first.ready, first.running, first.scheduled, first.dead) == (3, 1, 1, 0)
        other = cache.backlog(dsn, q, ["other"], now=100.5, max_age=1.0)
        assert other.ready == 7
        assert cache.statements == 1  # the second JobQueue reused the reading
        cache.backlog(dsn, q, ["other"], now=101.6, max_age=1.0)
        assert cache.statements == 2
        assert sum_backlog(q.stats(["ocr"]), ["ocr"]).running == 1
        assert jobs_by_owner(q, ["ocr"]) == {"pod-a": 1}
        cache.release(("ns", "a"))
        assert cache.open_count() == 1  # still used by b
        cache.release(("ns", "b"))
        assert cache.open_count() == 0
    finally:
        cache.close_all()


def test_a_capped_backlog_says_which_are_lower_bounds_and_a_lower_cap_is_not_reused(dsn: str, queue: Queue) -> None:
    queue.enqueue_many([NewJob("ocr", {"n": n}) for n in range(30)] + [NewJob("mail", {"n": n}) for n in range(3)])
    cache = QueueCache()
    try:
        q = cache.get(("ns", "a"), dsn)
        small = cache.backlog(dsn, q, ["ocr", "mail"], now=100.0, max_age=1.0, cap=11)
        assert (small.ready, small.lower_bounds) == (14, ("ready",))  # at least 11 ocr + 3 mail
        # A JobQueue needing a higher cap reads again; one needing less reuses that reading.
        large = cache.backlog(dsn, q, ["ocr"], now=100.1, max_age=1.0, cap=31)
        assert (large.ready, large.lower_bounds, cache.statements) == (30, (), 2)
        again = cache.backlog(dsn, q, ["mail"], now=100.2, max_age=1.0, cap=5)
        assert (again.ready, again.lower_bounds, cache.statements) == (3, (), 2)
        exact = cache.backlog(dsn, q, ["ocr"], now=100.3, max_age=1.0)
        assert (exact.ready, exact.lower_bounds, cache.statements) == (30, (), 3)
        assert sum_backlog(q.stats(["ocr"], cap=30), ["ocr"]).lower_bounds == ("ready",)
    finally:
        cache.close_all()


def test_the_poll_reports_each_types_limit_and_scaling_keeps_to_it(queue: Queue) -> None:
    queue.enqueue_many([NewJob("gpu", {"n": n}) for n in range(500)] + [NewJob("cpu", {"n": n}) for n in range(9)])
    queue.set_limit("gpu", max_running=4, rate=Rate(60, 60))
    queue.claim("pod-a", job_types=["gpu"], limit=10)
    backlog = sum_backlog(queue.stats(["gpu", "cpu"], cap=101), ["gpu", "cpu"])
    assert backlog.limited == (LimitedWork("gpu", 101, 4, 4, 60),)  # ready capped at 101: a lower bound
    assert (backlog.ready, backlog.running) == (101 + 9, 4)
    policy = ScalingSpec(0, 50, 1, 0, 300.0, 10.0)
    wanted = recommend(policy, backlog.ready, backlog.running, 1, limited=backlog.limited, capacity=2)
    # Pods take 2 jobs at once, so a target of 1 counts 2 per pod: cpu's 9 on 5 pods, gpu's 4 on 2.
    assert wanted == 5 + 2


@pytest.mark.parametrize(
    ("dsn", "reason"),
    [
        ("postgresql://app:hunter2@127.0.0.1:1/db?connect_timeout=2", "Unreachable"),
        ("host=127.0.0.1 port=5432 dbname=x password=hunter2 nonsense", "InvalidDSN"),
    ],
)
def test_failures_become_reasons_without_passwords(dsn: str, reason: str) -> None:
    cache = QueueCache()
    with pytest.raises(DatabaseProblem) as info:
        cache.get(("ns", "a"), dsn)
    assert info.value.reason == reason
    assert "hunter2" not in info.value.message


def test_access_denied_has_its_own_reason(dsn: str) -> None:
    # The server answers and refuses (here: no such database); retrying cannot help, so the
    # condition must not say Unreachable, which reads as "try again later".
    wrong = psycopg.conninfo.make_conninfo(dsn, dbname="pgwork_no_such_database", password="hunter2")
    with pytest.raises(DatabaseProblem) as info:
        QueueCache().get(("ns", "a"), wrong)
    assert info.value.reason == "AccessDenied"
    assert "pgwork_no_such_database" in info.value.message
    assert "hunter2" not in info.value.message


def test_not_migrated(empty_dsn: str) -> None:
    with pytest.raises(DatabaseProblem) as info:
        QueueCache().get(("ns", "a"), empty_dsn)
    assert info.value.reason == "NotMigrated"
    assert "pgwork migrate" in info.value.message


@pytest.mark.parametrize(
    "params",
    [
        {"dbname": "Zq9Xv7Kw3Jp", "password": "Zq9Xv7Kw3Jp"},  # libpq: database "..." does not exist
        {"sslmode": "Zq9Xv7Kw3Jp", "password": "Zq9Xv7Kw3Jp"},  # libpq: invalid sslmode value: "..."
        {"user": "Zq9Xv7Kw3Jp-user", "password": "Zq9Xv7Kw3Jp-user"},  # libpq: role "..." does not exist
    ],
)
def test_what_libpq_quotes_of_the_password_is_scrubbed(dsn: str, params: dict[str, str]) -> None:
    wrong = psycopg.conninfo.make_conninfo(dsn, **params)
    with pytest.raises(DatabaseProblem) as info:
        QueueCache().get(("ns", "a"), wrong)
    assert info.value.reason in ("AccessDenied", "InvalidDSN")
    secret = params["password"]
    runs = {secret[i : i + 4] for i in range(len(secret) - 3)}
    assert not [r for r in runs if r in str(info.value)], str(info.value)
    assert "***" in info.value.message


def test_ready_jobs_of_a_type_no_jobqueue_takes_are_reported_per_database(dsn: str, queue: Queue) -> None:
    """Issue 25: `pgwork enqueue ocr_typo` waited forever and no alert saw it (alerts are per
    JobQueue). The operator names such types per database, from the reading it makes anyway."""
    queue.enqueue_many([NewJob("ocr", {"n": n}) for n in range(2)] + [NewJob("mail", {}), NewJob("ocr_typo", {})])
    queue.enqueue("later_typo", {}, delay=3600)  # not ready: not reported
    # Another role's connection string for the same database: one database, not two.
    other_dsn = psycopg.conninfo.make_conninfo(dsn, application_name="another-role")
    cache = QueueCache()
    try:
        q = cache.get(("ns", "a"), dsn)
        cache.backlog(dsn, q, ["ocr"], now=100.0, max_age=1.0)
        database, orphans = cache.without_consumer(("ns", "a"), dsn, ["ocr"])
        assert orphans == {"mail": 1, "ocr_typo": 1}
        assert database.endswith(f"/{psycopg.conninfo.conninfo_to_dict(dsn)['dbname']}") and "@" not in database
        b = cache.get(("ns", "b"), other_dsn)
        cache.backlog(other_dsn, b, ["mail"], now=100.0, max_age=1.0)  # each round reads, then asks
        assert cache.without_consumer(("ns", "b"), other_dsn, ["mail"]) == (database, {"ocr_typo": 1})
        assert cache.without_consumer(("ns", "a"), dsn, ["ocr"]) == (database, {"ocr_typo": 1})
        cache.release(("ns", "b"))
        assert cache.without_consumer(("ns", "a"), dsn, ["ocr"])[1] == {"mail": 1, "ocr_typo": 1}
    finally:
        cache.close_all()


def test_the_without_consumer_gauge_follows_each_reading() -> None:
    metrics = OperatorMetrics()

    def value(job_type: str) -> float | None:
        return metrics.registry.get_sample_value(
            "pgwork_jobs_without_consumer", {"database": "db:5432/app", "job_type": job_type}
        )

    metrics.record_without_consumer("db:5432/app", {"mail": 3, "ocr_typo": 1})
    assert (value("mail"), value("ocr_typo")) == (3.0, 1.0)
    metrics.record_without_consumer("db:5432/app", {"ocr_typo": 2})
    assert (value("mail"), value("ocr_typo")) == (None, 2.0)  # a type taken care of loses its series
    metrics.record_without_consumer("db:5432/app", {})
    assert value("ocr_typo") is None
