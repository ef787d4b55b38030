"""A cancellation requested while a job ran survives the attempt failing before a heartbeat told
the worker (migration `cancel_wins_over_failure`): the job ends cancelled, not retried, its error
and the request kept; through `fail`, `fail_many` and a database carried forward from the version
before. A forged token still changes nothing, and a job nobody asked to cancel retries as before."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import psycopg
import pytest

from pgwork import sql_files
from pgwork.db import Queue, migrate
from pgwork.db.batches import DecidedFailure
from pgwork.failure import decide_failure
from pgwork.models import FailOutcome, Lease, failure_of
from tests.support.db import MakeRole
from tests.support.rows import Rows
from tests.support.versions import at_version

NOTE = "the attempt failed before it was seen, so the job ends cancelled instead of being retried"


def _row(dsn: str, job_id: int) -> dict[str, object]:
    with psycopg.connect(dsn) as conn:
        cur = conn.execute(
            """SELECT status::text AS status, attempt_count, lease_token, lease_owner, last_error,
                      cancel_requested_at IS NOT NULL AS cancel_kept, completed_at IS NOT NULL AS completed
                 FROM pgwork.jobs WHERE id = %s""",
            (job_id,),
        )
        names = [d.name for d in cur.description or []]
        row = cur.fetchone()
    assert row is not None
    return dict(zip(names, row, strict=True))


@pytest.mark.parametrize("retryable", [True, False], ids=["a retry decided", "dead decided"])
def test_a_failed_attempt_of_a_job_asked_to_cancel_ends_cancelled(
    dsn: str, make_role: MakeRole, retryable: bool
) -> None:
    with Queue(dsn) as maintainer, Queue(make_role("worker")) as q:
        held = Rows(maintainer, "ocr").cancel_requested(owner="pod-a")
        answer = q.fail(held.lease, "ValueError: page 3 unreadable", retryable=retryable)
        assert answer.outcome is FailOutcome.CANCELLED and answer.available_at is None
        assert q.claim("pod-b", job_types=["ocr"], limit=10) == []  # it does not run again
    row = _row(dsn, held.id)
    assert (row["status"], row["attempt_count"], row["lease_token"], row["lease_owner"]) == (
        "cancelled", 1, None, "pod-a"
    )  # fmt: skip
    assert row["cancel_kept"] and row["completed"]
    error = str(row["last_error"])
    assert error.startswith("ValueError: page 3 unreadable [cancellation requested at ")
    assert NOTE in error


def test_without_a_cancel_request_a_failure_still_retries_and_a_forged_token_changes_nothing(
    dsn: str, make_role: MakeRole
) -> None:
    with Queue(dsn) as maintainer, Queue(make_role("worker")) as q:
        rows = Rows(maintainer, "ocr")
        plain = rows.running(owner="pod-a")
        asked = rows.cancel_requested(owner="pod-a")
        forged = Lease(asked.id, uuid.uuid4(), "pod-a", asked.attempt, asked.max_attempts)
        assert q.fail(plain.lease, "boom").outcome is FailOutcome.RETRY
        assert q.fail(forged, "boom").outcome is FailOutcome.LEASE_LOST
    assert _row(dsn, plain.id)["status"] == "pending"
    untouched = _row(dsn, asked.id)
    assert (untouched["status"], untouched["cancel_kept"], untouched["last_error"]) == ("running", True, None)


def test_a_false_reason_is_refused_even_when_a_cancel_was_asked(dsn: str, make_role: MakeRole) -> None:
    with Queue(dsn) as maintainer, Queue(make_role("worker")) as q:
        held = Rows(maintainer, "ocr").cancel_requested()
        with (
            psycopg.connect(q.dsn, autocommit=True) as conn,
            pytest.raises(psycopg.errors.CheckViolation, match="not dead for that"),
        ):
            conn.execute(
                "SELECT * FROM pgwork.set_state_if_held(%s, %s, 'dead', 'attempts_used_up', NULL, 'x')",
                (held.id, held.lease.token),
            )


def test_fail_many_ends_each_asked_job_cancelled_and_retries_the_rest(dsn: str, make_role: MakeRole) -> None:
    now = datetime.now(UTC)
    with Queue(dsn) as maintainer, Queue(make_role("worker")) as q:
        rows = Rows(maintainer, "ocr")
        asked, plain = rows.cancel_requested(), rows.running()
        answers = q.fail_many(
            [DecidedFailure(j.lease, decide_failure(1, 5, True, 30.0, now), "boom") for j in (asked, plain)]
        )
    assert answers[asked.id].outcome is FailOutcome.CANCELLED
    assert answers[plain.id].outcome is FailOutcome.RETRY and answers[plain.id].available_at is not None
    assert (_row(dsn, asked.id)["status"], _row(dsn, plain.id)["status"]) == ("cancelled", "pending")


def test_a_database_at_the_version_before_carries_a_requested_cancel_through_the_upgrade(empty_dsn: str) -> None:
    [mine] = [m.version for m in sql_files.migrations() if m.name == "cancel_wins_over_failure"]
    at_version(empty_dsn, mine - 1)
    with Queue(empty_dsn, check=False) as old:
        held = Rows(old, "ocr").cancel_requested(owner="old-pod")
    assert migrate(empty_dsn) == list(range(mine, sql_files.latest_version() + 1))
    with Queue(empty_dsn) as q:
        # The lease and the request made before the upgrade: the failure after it ends cancelled.
        assert q.fail(held.lease, "boom").outcome is FailOutcome.CANCELLED
    assert _row(empty_dsn, held.id)["status"] == "cancelled"


@pytest.mark.parametrize(
    ("status", "outcome", "due"),
    [
        ("pending", FailOutcome.RETRY, True),
        ("dead", FailOutcome.DEAD, False),
        ("cancelled", FailOutcome.CANCELLED, False),
    ],
)
def test_failure_of_reads_the_state_the_failure_left(status: str, outcome: FailOutcome, due: bool) -> None:
    at = datetime(2026, 12, 3, tzinfo=UTC)
    answer = failure_of(status, at)
    assert answer.outcome is outcome and answer.available_at == (at if due else None)


def test_failure_of_refuses_a_state_no_failure_leaves() -> None:
    with pytest.raises(KeyError):
        failure_of("succeeded", datetime(2026, 12, 3, tzinfo=UTC))
