"""The invariant checks can fail: each broken promise, staged by hand on a real database, is counted.

The stagings run deliberately bad statements (an unfenced completion, an attempt_count bumped
without a claim) that pgwork itself never sends; that is what the checks are for.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg.rows import dict_row

from pgwork.db import Queue
from pgwork.models import Completion
from pgwork.tools.chaos import SQL, invariants
from pgwork.tools.chaos.invariants import REAPER_APP, InvariantCounts, violations
from tests.support.waiting import wait_for

CLEAN = InvariantCounts(**{f.name: 0 for f in dataclasses.fields(InvariantCounts)})


def _figures(**changes: int) -> InvariantCounts:
    return dataclasses.replace(CLEAN, **changes)


@pytest.mark.parametrize(
    ("figures", "expected", "fragment"),
    [
        (_figures(jobs=10, succeeded=10, results=10), 10, None),
        (_figures(jobs=9, succeeded=9), 10, "1 jobs lost"),
        (_figures(jobs=10, succeeded=9, stuck=1), 10, "neither succeeded nor dead"),
        (_figures(jobs=10, succeeded=9, stuck=1, running=1), 10, "still running"),
        (_figures(jobs=1, succeeded=1, missing_results=1), 1, "without their result row"),
        (_figures(jobs=1, succeeded=1, orphan_results=1), 1, "whose job did not succeed"),
        (_figures(jobs=1, succeeded=1, duplicate_successes=1), 1, "succeeded more than once"),
        (_figures(jobs=1, succeeded=1, duplicate_results=1), 1, "more than one result row"),
        (_figures(jobs=1, succeeded=1, results_not_by_holder=1), 1, "not produced by the holder"),
        (_figures(jobs=1, succeeded=1, stale_writes=2), 1, "2 writes by a worker that did not hold"),
        (_figures(jobs=1, succeeded=1, stolen_leases=1), 1, "another live lease held"),
        (_figures(jobs=1, succeeded=1, attempt_mismatches=1), 1, "attempt_count differs"),
        (_figures(jobs=1, succeeded=1, writes_after_resume=1), 1, "resumed worker"),
        (_figures(jobs=3, succeeded=1, dead=1), 3, "do not add up"),
    ],
)
def test_violations_table(figures: InvariantCounts, expected: int, fragment: str | None) -> None:
    found = violations(figures, expected_jobs=expected)
    if fragment is None:
        assert found == []
    else:
        assert any(fragment in v for v in found), found


def test_crashes_and_leaks_are_violations() -> None:
    ok = _figures(jobs=1, succeeded=1)
    assert violations(ok, expected_jobs=1, worker_crashes=2) == ["2 worker exits nobody caused (crash loop)"]
    assert violations(ok, expected_jobs=1, password_leaks=1) == ["1 log files containing the database password"]


def test_stale_owner_writes_add_up() -> None:
    f = _figures(stale_writes=1, writes_after_resume=2, results_not_by_holder=3)
    assert f.stale_owner_writes == 6


# -- the SQL, against real rows --------------------------------------------------------


@pytest.fixture
def chaos_dsn(dsn: str) -> str:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(SQL.query("install"))
    return dsn


def _app_dsn(dsn: str, app: str) -> str:
    return psycopg.conninfo.make_conninfo(dsn, application_name=app)


@pytest.fixture
def worker_queue(chaos_dsn: str) -> Iterator[Queue]:
    # Named as `pgwork worker --id w1` names its sessions.
    with Queue(chaos_dsn, application_name="pgwork-worker:w1") as q:
        yield q


def _read(dsn: str) -> InvariantCounts:
    with psycopg.connect(dsn, autocommit=True, row_factory=dict_row) as conn:
        return invariants.read(conn)


def _execute(dsn: str, statement: Any, params: dict[str, Any] | None = None, *, app: str = "test") -> None:
    with psycopg.connect(_app_dsn(dsn, app), autocommit=True) as conn:
        conn.execute(statement, params)


def test_a_clean_life_breaks_nothing(chaos_dsn: str, worker_queue: Queue) -> None:
    worker_queue.enqueue("ocr", {"doc": 1})
    worker_queue.enqueue("ocr", {"doc": 2}, max_attempts=1)
    a, b = worker_queue.claim("w1", limit=2)
    assert worker_queue.succeed(a.lease, {"ok": 1}) is Completion.CREATED
    worker_queue.fail(b.lease, "boom")
    f = _read(chaos_dsn)
    assert (f.jobs, f.succeeded, f.dead, f.claims, f.results) == (2, 1, 1, 2, 1)
    assert violations(f, expected_jobs=2) == []


def test_an_unfenced_completion_by_another_worker_is_a_stale_write(chaos_dsn: str, worker_queue: Queue) -> None:
    job_id = worker_queue.enqueue("ocr", {"doc": 1})
    worker_queue.claim("w1")
    _execute(
        chaos_dsn,
        "UPDATE pgwork.jobs SET status = 'succeeded', completed_at = now(), lease_token = NULL,"
        " lease_expires_at = NULL WHERE id = %(id)s",
        {"id": job_id},
        app="pgwork-worker:w2",
    )
    f = _read(chaos_dsn)
    assert f.stale_writes == 1 and f.missing_results == 1
    assert any("did not hold the lease" in v for v in violations(f, expected_jobs=1))


def test_a_result_by_someone_else_is_caught(chaos_dsn: str, worker_queue: Queue) -> None:
    job_id = worker_queue.enqueue("ocr", {"doc": 1}, key="k1")
    lease = worker_queue.claim("w1")[0].lease
    worker_queue.succeed(lease, {"ok": 1})
    _execute(
        chaos_dsn,
        "UPDATE pgwork.job_results SET produced_by = 'w9' WHERE job_id = %(id)s",
        {"id": job_id},
    )
    _execute(
        chaos_dsn,
        "INSERT INTO pgwork.job_results (idempotency_key, job_id, job_type, produced_by, result)"
        " VALUES ('k-extra', %(id)s, 'ocr', 'w1', '{}')",
        {"id": job_id},
    )
    f = _read(chaos_dsn)
    assert f.results_not_by_holder == 1 and f.orphan_results == 1 and f.duplicate_results == 1


def test_an_attempt_without_a_claim_is_a_mismatch(chaos_dsn: str, worker_queue: Queue) -> None:
    job_id = worker_queue.enqueue("ocr", {"doc": 1})
    worker_queue.claim("w1")
    _execute(chaos_dsn, "UPDATE pgwork.jobs SET attempt_count = attempt_count + 1 WHERE id = %(id)s", {"id": job_id})
    f = _read(chaos_dsn)
    assert f.attempt_mismatches == 1 and f.stuck == 1 and f.running == 1


def test_a_claim_over_a_live_lease_is_stolen(chaos_dsn: str, worker_queue: Queue) -> None:
    job_id = worker_queue.enqueue("ocr", {"doc": 1})
    worker_queue.claim("w1")
    _execute(
        chaos_dsn,
        "UPDATE pgwork.jobs SET lease_owner = 'w2', lease_token = gen_random_uuid(),"
        " attempt_count = attempt_count + 1 WHERE id = %(id)s",
        {"id": job_id},
        app="pgwork-worker:w2",
    )
    f = _read(chaos_dsn)
    assert f.stolen_leases == 1 and f.claims == 2 and f.attempt_mismatches == 0


def test_a_write_after_resume_about_a_reclaimed_job_is_caught(chaos_dsn: str, worker_queue: Queue) -> None:
    job_id = worker_queue.enqueue("ocr", {"doc": 1})
    paused_at = time.time()
    worker_queue.claim("w1", lease=0.05)
    with Queue(chaos_dsn, application_name=REAPER_APP) as reaper:
        reaped = wait_for(reaper.reap, 5, what="the 50 ms lease expiring and being reaped")
        assert len(reaped) == 1
    # The late write below comes from new connections opened after this instant: strictly later.
    resumed_at = time.time()
    _execute(
        chaos_dsn,
        SQL.query("record_fault"),
        {"kind": "pause_worker", "target": "w1", "started_at": paused_at, "ended_at": resumed_at},
    )
    f = _read(chaos_dsn)
    assert f.reclaims == 1 and f.reclaimed_from_paused == 1 and f.writes_after_resume == 0
    # The resumed worker's result lands anyway (as a broken fence would let it).
    _execute(
        chaos_dsn,
        "INSERT INTO pgwork.job_results (idempotency_key, job_id, job_type, produced_by, result)"
        " VALUES ('late', %(id)s, 'ocr', 'w1', '{}')",
        {"id": job_id},
        app="pgwork-worker:w1",
    )
    f = _read(chaos_dsn)
    assert f.writes_after_resume == 1
    assert any("resumed worker" in v for v in violations(f, expected_jobs=1))
