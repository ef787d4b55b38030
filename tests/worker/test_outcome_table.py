"""The worker's pure decisions, as tables: the Outcome of an attempt, and how many jobs to claim.
No database, no subprocess."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from pgwork.failure import DeadReason
from pgwork.models import Completion, FailOutcome, TypeStats
from pgwork.worker.claims import ahead_pays, claim_size, held_back, recent_run, wake_below
from pgwork.worker.job import PermanentError, StopReason
from pgwork.worker.outcome import Ended, Outcome, after_failure, after_success, decide
from pgwork.worker.plan import claim_ahead, whole_batch_ahead

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
        ([_stats(1)], True),  # ready but unseen by the claim (a ring rotation, a row held a moment): look again
        ([_stats(0, max_running=2)], False),  # limited, nothing ready: done
        ([_stats(1, max_running=2)], True),  # ready behind a running limit: wait for the slots
        ([_stats(1, rate_count=10)], True),  # ready behind a spent rate: wait for the tokens
        ([_stats(0), _stats(1, max_running=1)], True),
    ],
)
def test_a_burst_worker_looks_again_once_and_waits_for_jobs_a_limit_holds_back(
    stats: list[TypeStats], expected: bool
) -> None:
    assert held_back(stats) is expected
    # After a second empty claim only a limit keeps it: a job no claim can see never does.
    limited = any(s.ready > 0 and (s.max_running is not None or s.rate_count is not None) for s in stats)
    assert held_back(stats, looked_again=True) is limited


@pytest.mark.parametrize(("per_slot", "ahead"), [(1, 0), (2, 2), (64, 64)])
def test_a_batch_slot_claims_one_batch_ahead(per_slot: int, ahead: int) -> None:
    assert claim_ahead(per_slot) == ahead


@pytest.mark.parametrize(
    ("run_seconds", "batch", "concurrency", "pays"),
    [
        (None, 100, 16, False),  # no job finished yet: nothing claimed ahead until one has
        (0.00002, 100, 16, True),  # trivial jobs: a batch runs in 0.1 ms, the claim's round trip is most of it
        (0.016, 100, 16, True),  # 100 ms a batch in the slots: the bound
        (0.017, 100, 16, False),
        (0.2, 100, 16, False),  # model inference: 1.25 s a batch, a claim is 0.2% of it
        (0.001, 200, 1, False),  # one slot: 200 ms a batch
        (0.001, 20, 0, True),  # no slot count (never, but never a division by zero)
    ],
)
def test_a_batch_is_claimed_ahead_only_while_it_runs_quickly(
    run_seconds: float | None, batch: int, concurrency: int, pays: bool
) -> None:
    assert ahead_pays(run_seconds, batch, concurrency) is pays


@pytest.mark.parametrize(
    ("previous", "mean", "jobs", "recent"),
    [
        (None, 0.5, 1, 0.5),  # the first batch written sets it
        (0.0, 1.0, 100, 1.0),  # a whole window's batch replaces it
        (0.0, 1.0, 400, 1.0),
        (0.0, 1.0, 1, 0.01),  # one job moves it a hundredth of the way
        (0.00002, 5.0, 1, 0.0500198),  # one slow job among quick ones: still claims ahead at batch 20, conc 16
        (1.0, 0.0, 50, 0.5),  # quick jobs after slow ones: half a window, half the way
        (0.3, 0.3, 7, 0.3),  # steady: unchanged
        (0.2, 0.4, 0, 0.2),  # no job timed (never told so, but no change)
    ],
)
def test_the_recent_run_time_is_a_mean_over_about_a_hundred_jobs(
    previous: float | None, mean: float, jobs: int, recent: float
) -> None:
    assert recent_run(previous, mean, jobs) == pytest.approx(recent)


def test_one_slow_job_in_a_small_batch_does_not_stop_claiming_ahead_but_a_run_of_them_does() -> None:
    # --batch 100 --concurrency 16: ahead while the recent mean is at most 16 ms a job.
    quick = recent_run(None, 0.00002, 100)
    assert ahead_pays(recent_run(None, 0.5, 1), 100, 16) is False  # that batch's mean alone would stop it
    assert ahead_pays(recent_run(quick, 0.5, 1), 100, 16) is True
    recent = quick
    for _ in range(3):
        recent = recent_run(recent, 0.5, 1)
    assert ahead_pays(recent, 100, 16) is True
    assert ahead_pays(recent_run(recent, 0.5, 1), 100, 16) is False  # the fourth in a row


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


@pytest.mark.parametrize(
    ("per_slot", "batch", "ahead"),
    [
        (1, 1, 0),  # a one-job worker's claim rides on its write instead
        (1, 10, 0),
        (1, 11, 11),  # too large to ride on the write: one whole batch ahead
        (1, 100, 100),
        (64, 100, 0),  # a batch handler's slot has its own batch ahead (claim_ahead)
    ],
)
def test_plain_handlers_at_a_large_batch_claim_one_whole_batch_ahead(per_slot: int, batch: int, ahead: int) -> None:
    assert whole_batch_ahead(per_slot, batch) == ahead


@pytest.mark.parametrize(
    ("waiting", "running", "finishing", "claim"),
    [
        (0, 0, 0, 100),  # idle: the first batch
        (84, 16, 0, 100),  # one batch in hand, the runners busy: the next one ahead
        (85, 16, 0, 0),  # more than one batch in hand: never a fragment of the next
        (184, 16, 0, 0),  # one batch ahead already: nothing more, whatever the backlog
        (0, 10, 0, 100),  # the runners running dry
        (0, 16, 184, 100),  # the last batch's write under way: the claim overlaps it
        (0, 16, 384, 100),  # writes pending up to four capacities beside one in hand: still one ahead
        (0, 16, 385, 0),  # the writer falls behind: wait for it
        (84, 16, 300, 100),
        (84, 16, 301, 0),
    ],
)
def test_claim_size_with_a_whole_batch_ahead(waiting: int, running: int, finishing: int, claim: int) -> None:
    # --concurrency 16 --batch 100 with plain handlers: capacity 100, one whole batch ahead.
    assert claim_size(16, 100, waiting=waiting, running=running, finishing=finishing, ahead=100) == claim
    # Held never exceeds the capacity and one batch.
    assert waiting + running + claim <= 200


@pytest.mark.parametrize(
    ("holds", "batch", "concurrency", "ahead", "below"),
    [
        (16, 100, 16, 0, 16),  # no batch ahead: when the runners run dry of queued jobs
        (16, 100, 16, 100, 85),  # a batch ahead: as soon as the jobs in hand fit in the capacity
        (50, 20, 50, 20, 1),  # concurrency above the batch: once nothing is queued
    ],
)
def test_when_the_runners_wake_the_main_loop_to_claim(
    holds: int, batch: int, concurrency: int, ahead: int, below: int
) -> None:
    assert wake_below(holds, batch, concurrency, ahead) == below
    if ahead:  # woken when queued < below, with every runner busy: the claim fits
        capacity = max(holds, batch)
        assert claim_size(holds, batch, waiting=below - 1, running=concurrency, ahead=ahead) == batch
        assert claim_size(holds, batch, waiting=below, running=concurrency, ahead=ahead) == (
            batch if below + concurrency <= capacity else 0
        )
