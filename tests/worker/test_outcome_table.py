"""The worker's pure decisions, as tables: the Outcome of an attempt, and how many jobs to claim.
No database, no subprocess."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from pgwork.failure import DeadReason
from pgwork.models import Completion, FailOutcome, TypeStats
from pgwork.worker.claims import claim_size, held_back
from pgwork.worker.job import PermanentError, StopReason
from pgwork.worker.outcome import Ended, Outcome, after_failure, after_success, decide
from pgwork.worker.plan import claim_ahead

NOW = datetime(2026, 1, 1, tzinfo=UTC)
BOOM = ValueError("boom")


@pytest.mark.parametrize(
    ("ended", "stop", "released", "attempt", "outcome", "reason"),
    [
        # The handler returned a storable value: write it.
        (Ended(value={"n": 1}), None, False, 1, Outcome.SUCCEEDED, None),
        (Ended(value=None), None, False, 1, Outcome.SUCCEEDED, None),
        # It raised: retry while attempts remain, dead once used up, dead at once if permanent.
        (Ended(error=BOOM), None, False, 1, Outcome.RETRY, None),
        (Ended(error=BOOM), None, False, 3, Outcome.DEAD, DeadReason.ATTEMPTS_USED_UP),
        (Ended(error=PermanentError("bad input")), None, False, 1, Outcome.DEAD, DeadReason.NOT_RETRYABLE),
        # A handler's KeyboardInterrupt or SystemExit is an error too, never a crash.
        (Ended(error=SystemExit(3)), None, False, 1, Outcome.RETRY, None),
        # A value no results table can hold: dead, not retried.
        (Ended(value=float("nan")), None, False, 1, Outcome.DEAD, DeadReason.NOT_RETRYABLE),
        (Ended(value={"s": "\x00"}), None, False, 1, Outcome.DEAD, DeadReason.NOT_RETRYABLE),
        (Ended(value=object()), None, False, 1, Outcome.DEAD, DeadReason.NOT_RETRYABLE),
        # A payload that never reached a handler: dead at once.
        (Ended(unreadable="not an object"), None, False, 1, Outcome.DEAD, DeadReason.NOT_RETRYABLE),
        # Told to stop: the reason wins over whatever the handler did.
        (Ended(value=1), StopReason.CANCELLED, False, 1, Outcome.CANCELLED, None),
        (Ended(error=BOOM), StopReason.CANCELLED, False, 1, Outcome.CANCELLED, None),
        (Ended(value=1), StopReason.LEASE_LOST, False, 1, Outcome.LEASE_LOST, None),
        (Ended(error=BOOM), StopReason.LEASE_LOST, False, 3, Outcome.LEASE_LOST, None),
        # Released on shutdown while it ran: nothing to write, whatever happened.
        (Ended(value=1), StopReason.SHUTDOWN, True, 1, Outcome.RELEASED, None),
        (Ended(error=BOOM), None, True, 1, Outcome.RELEASED, None),
        (Ended(unreadable="x"), None, True, 1, Outcome.RELEASED, None),
    ],
)
def test_outcome_of_an_attempt(
    ended: Ended, stop: StopReason | None, released: bool, attempt: int, outcome: Outcome, reason: DeadReason | None
) -> None:
    decision = decide(ended, stop, released=released, attempt=attempt, max_attempts=3, backoff=7.0, now=NOW)
    assert decision.outcome is outcome
    if outcome is Outcome.SUCCEEDED:
        assert decision.result_json is not None and decision.failure is None
    elif outcome in (Outcome.RETRY, Outcome.DEAD):
        assert decision.failure is not None and decision.error and decision.result_json is None
        assert decision.failure.reason is reason
    else:
        assert decision.failure is None and decision.result_json is None


def test_a_retry_is_scheduled_by_the_backoff_and_the_result_serialised_once() -> None:
    retry = decide(Ended(error=BOOM), None, released=False, attempt=1, max_attempts=3, backoff=7.0, now=NOW)
    assert retry.failure is not None and retry.failure.available_at == NOW + timedelta(seconds=7)
    assert retry.error_type == "ValueError" and retry.message == "boom" and "ValueError: boom" in (retry.error or "")
    ok = decide(Ended(value={"b": [1, 2]}), None, released=False, attempt=1, max_attempts=3, backoff=0, now=NOW)
    assert ok.result_json == '{"b": [1, 2]}'


def test_a_password_in_an_exception_never_reaches_last_error() -> None:
    exc = RuntimeError("cannot connect to postgresql://app:hunter2@db/x")
    decision = decide(Ended(error=exc), None, released=False, attempt=1, max_attempts=3, backoff=1, now=NOW)
    assert "hunter2" not in (decision.error or "") and "hunter2" not in (decision.message or "")


@pytest.mark.parametrize(
    ("answer", "outcome"),
    [
        (Completion.CREATED, Outcome.SUCCEEDED),
        (Completion.ALREADY_EXISTED, Outcome.DUPLICATE),
        (Completion.LEASE_LOST, Outcome.LEASE_LOST),
        (FailOutcome.RETRY, Outcome.RETRY),
        (FailOutcome.DEAD, Outcome.DEAD),
        (FailOutcome.CANCELLED, Outcome.CANCELLED),  # a cancel asked while the attempt failed
        (FailOutcome.LEASE_LOST, Outcome.LEASE_LOST),
    ],
)
def test_the_databases_answer_is_the_last_word(answer: Completion | FailOutcome, outcome: Outcome) -> None:
    assert (after_success(answer) if isinstance(answer, Completion) else after_failure(answer)) is outcome


@pytest.mark.parametrize(
    ("concurrency", "batch", "waiting", "running", "claim"),
    [
        (1, 1, 0, 0, 1),  # idle one-job worker: one
        (1, 1, 0, 1, 0),  # busy
        (16, 1, 0, 5, 1),  # --batch 1 caps the claim whatever the free slots
        (16, 100, 0, 0, 100),  # first claim: a whole batch
        (16, 100, 20, 16, 0),  # every runner has one queued: hold no idle leases
        (16, 100, 10, 16, 74),  # runners about to run dry: fill up to the batch's capacity
        (16, 10, 0, 16, 0),  # all runners busy and capacity is 16
        (16, 10, 0, 10, 6),  # slots free: claim again at once, never more than free
        (4, 100, 0, 0, 100),
        (100, 10, 0, 0, 10),  # a claim never exceeds --batch
    ],
)
def test_claim_size(concurrency: int, batch: int, waiting: int, running: int, claim: int) -> None:
    assert claim_size(concurrency, batch, waiting=waiting, running=running) == claim


@pytest.mark.parametrize(
    ("concurrency", "batch", "waiting", "running", "finishing", "claim"),
    [
        (16, 100, 0, 0, 100, 100),  # one capacity of writes pending: the next batch runs meanwhile
        (16, 100, 0, 0, 150, 50),  # the writer falls behind: claim only what keeps two capacities
        (16, 100, 0, 0, 200, 0),  # two capacities held: wait for the writes
        (1, 1, 0, 0, 1, 1),  # a one-job worker claims the next while the last one's write is in flight
        (1, 1, 0, 0, 2, 0),
    ],
)
def test_claim_size_waits_for_a_writer_that_falls_behind(
    concurrency: int, batch: int, waiting: int, running: int, finishing: int, claim: int
) -> None:
    assert claim_size(concurrency, batch, waiting=waiting, running=running, finishing=finishing) == claim


def _stats(ready: int, max_running: int | None = None, rate_count: int | None = None) -> TypeStats:
    return TypeStats("t", ready, 0, 0, 0, 0, 0.0, 0.0, 1, max_running, rate_count, 60.0 if rate_count else None)


@pytest.mark.parametrize(
    ("stats", "expected"),
    [
        ([], False),
        ([_stats(0)], False),  # nothing ready: done
        ([_stats(1)], False),  # ready but unlimited: the claim would have taken it (someone else did)
        ([_stats(0, max_running=2)], False),  # limited, nothing ready: done
        ([_stats(1, max_running=2)], True),  # ready behind a running limit: wait for the slots
        ([_stats(1, rate_count=10)], True),  # ready behind a spent rate: wait for the tokens
        ([_stats(0), _stats(1, max_running=1)], True),
    ],
)
def test_a_burst_worker_waits_only_for_jobs_a_limit_holds_back(stats: list[TypeStats], expected: bool) -> None:
    assert held_back(stats) is expected


@pytest.mark.parametrize(("per_slot", "ahead"), [(1, 0), (2, 2), (64, 64)])
def test_a_batch_slot_claims_one_batch_ahead(per_slot: int, ahead: int) -> None:
    assert claim_ahead(per_slot) == ahead


@pytest.mark.parametrize(
    ("waiting", "running", "finishing", "claim"),
    [
        (0, 0, 0, 64),  # idle: the first batch
        (64, 0, 0, 64),  # the first claimed, not started yet: the next one ahead
        (0, 64, 0, 64),  # one call runs: the next batch ahead of it
        (64, 64, 0, 0),  # one running, one ahead: nothing more
        (0, 64, 64, 64),  # the last call's outcomes still being written do not stop the next claim
        (64, 64, 64, 0),
    ],
)
def test_claim_size_with_a_batch_ahead(waiting: int, running: int, finishing: int, claim: int) -> None:
    # One slot of batch 64 (concurrency 1), holding the slot's batch and one ahead.
    holds = 1 * 64 + claim_ahead(64)
    assert claim_size(holds, 64, waiting=waiting, running=running, finishing=finishing) == claim
