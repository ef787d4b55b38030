"""What running a handler leads to: one `Outcome`, decided by a pure function (no I/O).

`decide` reads how the attempt ended (the handler's value or exception, or a payload it could
not be given) and why the job was told to stop (lease lost, cancelled, released on shutdown),
and says what the worker must write: a result, a failure (retry or dead, by
pgwork.failure.decide_failure), a cancellation acknowledgement, or nothing. The executor
(pgwork.worker.finishes) applies it; the database's answer can still turn a write into
LEASE_LOST (the token no longer held the job) or a success into DUPLICATE.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pgwork.durations import format_duration
from pgwork.errors import InvalidArgument
from pgwork.failure import FailureDecision, decide_failure
from pgwork.jsonshape import result_json
from pgwork.models import Completion, FailOutcome
from pgwork.pipeline import Then, check_then
from pgwork.validation import JobRow, validate
from pgwork.worker.describe import describe_error, error_type, redact_message
from pgwork.worker.job import PermanentError, StopReason


class Outcome(enum.Enum):
    """One attempt's outcome; the value is the `outcome` label of the worker's metrics."""

    SUCCEEDED = "succeeded"  # the result row is new and the job succeeded
    DUPLICATE = "duplicate"  # another run wrote this key's result first; the job succeeded
    RETRY = "retry"  # failed; pending again after a backoff
    DEAD = "dead"  # failed for good (not retryable, attempts used up, unreadable, bad result)
    CANCELLED = "cancelled"  # cancellation requested while running; acknowledged
    LEASE_LOST = "lease_lost"  # the token no longer holds the job: nothing written
    RELEASED = "released"  # given back to pending on shutdown: nothing written by the runner


@dataclass(frozen=True)
class Ended:
    """How the attempt ended. `unreadable`: the payload could not be given to a handler (it did
    not run). Otherwise `error` is what the handler raised, or None and `value` is its return."""

    value: Any = None
    error: BaseException | None = None
    unreadable: str | None = None
    killed: bool = False  # the worker killed the handler's process (it did not stop when told)


@dataclass(frozen=True)
class Decision:
    """What to write. SUCCEEDED carries the result as JSON text (serialised once, here);
    RETRY/DEAD carry the failure decision and the last_error text; `error_type`/`message` are
    for the span when the attempt is an error."""

    outcome: Outcome
    result_json: str | None = None
    failure: FailureDecision | None = None
    error: str | None = None
    error_type: str | None = None
    message: str | None = None
    # SUCCEEDED through pgwork.Then: the follow-up jobs, validated, written with the result.
    followups: tuple[JobRow, ...] = ()


def decide(
    ended: Ended,
    stop: StopReason | None,
    *,
    released: bool,
    attempt: int,
    max_attempts: int,
    backoff: float,
    now: datetime,
    timeout: float | None = None,
) -> Decision:
    """The outcome of one attempt (see the module doc). `released`: shutdown already gave the job
    back, so the runner writes nothing; `backoff`: the retry delay for this attempt; `timeout`:
    the attempt's hard timeout, named in the error when it was told to stop for it."""
    if released:
        return Decision(Outcome.RELEASED)
    if ended.unreadable is not None:
        return _dead(ended.unreadable, "undecodable_payload", attempt, max_attempts, now)
    if stop is StopReason.CANCELLED:
        return Decision(Outcome.CANCELLED)
    if stop is StopReason.LEASE_LOST:
        return lost()
    if stop is StopReason.TIMED_OUT:
        return timed_out(
            timeout or 0.0,
            returned=not ended.killed,
            attempt=attempt,
            max_attempts=max_attempts,
            backoff=backoff,
            now=now,
            killed=ended.killed,
        )
    if ended.error is not None:
        exc = ended.error
        retryable = not isinstance(exc, PermanentError)
        failure = decide_failure(attempt, max_attempts, retryable, backoff, now)
        outcome = Outcome.RETRY if failure.state == "pending" else Outcome.DEAD
        return Decision(outcome, None, failure, describe_error(exc), error_type(exc), redact_message(exc))
    value = ended.value
    followups: tuple[JobRow, ...] = ()
    if isinstance(value, Then):
        try:
            followups = followups_of(value)
        except InvalidArgument as exc:
            problem = f"handler returned follow-up jobs that cannot be stored: {exc}"
            return _dead(problem, "invalid_followups", attempt, max_attempts, now)
        value = value.result
    try:
        text = result_json(value)
    except InvalidArgument as exc:
        problem = f"handler returned a result that cannot be stored: {exc}"
        return _dead(problem, "invalid_result", attempt, max_attempts, now)
    return Decision(Outcome.SUCCEEDED, result_json=text, followups=followups)


def followups_of(value: Then) -> tuple[JobRow, ...]:
    """A Then's jobs, validated as any enqueue's; a bad one names its place among them."""
    rows = []
    for i, job in enumerate(check_then(value)):
        try:
            rows.append(validate(job))
        except InvalidArgument as exc:
            raise InvalidArgument(exc.field, f"{exc.problem} (follow-up {i}, from 0)", exc.fix) from None
    return tuple(rows)


def timed_out(
    timeout: float,
    *,
    returned: bool,
    attempt: int,
    max_attempts: int,
    backoff: float,
    now: datetime,
    killed: bool = False,
) -> Decision:
    """An attempt past its hard timeout: a retryable failure (retried by its backoff, dead once
    its attempts are used up) whose error says so, whether the handler returned when told
    (`returned`) or was abandoned."""
    failure = decide_failure(attempt, max_attempts, True, backoff, now)
    outcome = Outcome.RETRY if failure.state == "pending" else Outcome.DEAD
    text = timeout_message(timeout, returned=returned, killed=killed)
    return Decision(outcome, None, failure, text, "timed_out", text)


def timeout_message(timeout: float, *, returned: bool, killed: bool = False) -> str:
    """A timed-out attempt's last_error."""
    how = "the handler stopped when told; its result was discarded" if returned else "handler did not return"
    if killed:
        how = "handler did not return; its process was killed and replaced"
    return f"timed out after {format_duration(timeout)} ({how})"


def abandoned(
    stop: StopReason | None, timeout: float, *, attempt: int, max_attempts: int, backoff: float, now: datetime
) -> Decision:
    """An attempt whose handler did not return after being told to stop: the outcome written
    without it. A cancellation asked for first still ends as cancelled, a lost lease writes
    nothing, and a timeout fails the attempt."""
    if stop is StopReason.CANCELLED:
        return Decision(Outcome.CANCELLED)
    if stop is StopReason.LEASE_LOST:
        return lost()
    return timed_out(timeout, returned=False, attempt=attempt, max_attempts=max_attempts, backoff=backoff, now=now)


def worker_error(text: str, attempt: int, max_attempts: int, backoff: float, now: datetime) -> Decision:
    """The worker itself failed while finishing the job: a retryable failure, recorded (fenced) so
    the row does not stay `running` until its lease lapses."""
    failure = decide_failure(attempt, max_attempts, True, backoff, now)
    return Decision(Outcome.RETRY if failure.state == "pending" else Outcome.DEAD, failure=failure, error=text)


def refused_result(problem: str, attempt: int, max_attempts: int, now: datetime) -> Decision:
    """A result the database refused (a case result_json missed): dead, not a runner crash."""
    return _dead(f"the result could not be stored: {problem}", "invalid_result", attempt, max_attempts, now)


def lost() -> Decision:
    return Decision(
        Outcome.LEASE_LOST, error_type="lease_lost", message="the lease was lost; the effect was not written"
    )


def _dead(problem: str, kind: str, attempt: int, max_attempts: int, now: datetime) -> Decision:
    failure = decide_failure(attempt, max_attempts, False, 0.0, now)
    return Decision(Outcome.DEAD, None, failure, problem, kind, problem)


def after_success(completion: Completion) -> Outcome:
    """What the database's answer to a fenced success makes of SUCCEEDED."""
    if completion is Completion.CREATED:
        return Outcome.SUCCEEDED
    return Outcome.DUPLICATE if completion is Completion.ALREADY_EXISTED else Outcome.LEASE_LOST


def after_failure(answer: FailOutcome) -> Outcome:
    """What the database's answer to a fenced failure makes of RETRY/DEAD (attempts used up
    turn a retry into dead there too, and a cancellation requested meanwhile into cancelled)."""
    return {
        FailOutcome.RETRY: Outcome.RETRY,
        FailOutcome.DEAD: Outcome.DEAD,
        FailOutcome.CANCELLED: Outcome.CANCELLED,
        FailOutcome.LEASE_LOST: Outcome.LEASE_LOST,
    }[answer]
