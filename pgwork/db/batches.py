"""The Queue's batched finishes: many failures in one statement, and a batch of successes and
failures written in one transaction. Split from pgwork.db.queue only to keep modules small."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from psycopg import errors

from pgwork.db.base import QueueBase
from pgwork.db.connect import AnyConnection
from pgwork.db.params import followup_params
from pgwork.db.pipelines import after_error
from pgwork.db.roundtrip import claim_params, finish_then_claim, success_params
from pgwork.db.rows import FailManyRow, SucceedManyRow
from pgwork.errors import InvalidArgument
from pgwork.failure import FailureDecision
from pgwork.models import ClaimedJob, Completion, FailOutcome, Failure, Lease, failure_of
from pgwork.validation import JobRow, error_text


@dataclass(frozen=True)
class DecidedFailure:
    """A failed attempt with its decision made (pgwork.failure.decide_failure) and its error text."""

    lease: Lease
    decision: FailureDecision
    error: str


@dataclass(frozen=True)
class StoredSuccess:
    """A success whose result is already JSON text the results table accepts
    (pgwork.jsonshape.result_json): serialised once, by the caller that checked it."""

    lease: Lease
    result_json: str
    # Jobs to create with this success (pgwork.Then), validated; only if its result is written.
    followups: Sequence[JobRow] = ()


class Batches(QueueBase):
    def fail_many(
        self, failures: Sequence[DecidedFailure], *, conn: AnyConnection | None = None, now: datetime | None = None
    ) -> dict[int, Failure]:
        """Apply many decided failures in one statement, each fenced by its own token as `fail`
        is: a job whose token no longer holds it is untouched and answers LEASE_LOST."""
        if not failures:
            return {}
        _check_once([f.lease for f in failures])
        rows = self._many("fail_many", _fail_params(failures, now), FailManyRow, conn)
        return _failures(failures, rows)

    def finish_many(
        self,
        successes: Sequence[StoredSuccess],
        failures: Sequence[DecidedFailure],
        *,
        conn: AnyConnection | None = None,
        now: datetime | None = None,
    ) -> tuple[dict[int, Completion], dict[int, Failure]]:
        """Successes (pgwork.succeed_many) and failures (pgwork.fail_many) in one transaction:
        one commit for the whole batch, each job still fenced by its own token, each result row
        written in the same transaction that marks its job succeeded."""
        _check_once([s.lease for s in successes] + [f.lease for f in failures])
        # One statement is its own transaction; BEGIN and COMMIT would be two more round trips.
        both = bool(successes) and bool(failures)
        with self._pool.connection(conn) as c, c.transaction() if both else contextlib.nullcontext():
            done: list[SucceedManyRow] = []
            failed: list[FailManyRow] = []
            if successes:
                name, params = _succeed_statement(successes, now)
                done = self._many(name, params, SucceedManyRow, c)
            if failures:
                failed = self._many("fail_many", _fail_params(failures, now), FailManyRow, c)
        return _completions(successes, done), _failures(failures, failed)

    def finish_then_claim(
        self,
        successes: Sequence[StoredSuccess],
        failures: Sequence[DecidedFailure],
        owner: str,
        *,
        job_types: Iterable[str] | None = None,
        limit: int = 1,
        lease: float = 30.0,
        now: datetime | None = None,
    ) -> Finished:
        """`finish_many`, then `claim`, in one round trip and one commit (pgwork.db.roundtrip):
        the claim behind a savepoint, the finishes fenced as ever. Raises what the finishes raised
        (then nothing was written or claimed); a claim that failed is `Finished.claim_error`, and
        the finishes were committed without it."""
        _check_once([s.lease for s in successes] + [f.lease for f in failures])
        claim = claim_params(owner, job_types, limit, lease, now)
        name, succeed = _succeed_statement(successes, now) if successes else ("succeed_many", None)
        fail = _fail_params(failures, now) if failures else None
        with self._pool.connection() as c:
            try:
                trip = finish_then_claim(c, succeed, fail, claim, succeed_statement=name)
            except errors.InvalidParameterValue as exc:
                raise after_error(exc) from None
        # A claim that failed on a pooler's symptom after the finishes committed is caught in the
        # round trip, so the pool never sees it: told here, as any other call's would be.
        error = None if trip.claim_error is None else self._pool.pooler_met(trip.claim_error)
        return Finished(_completions(successes, trip.done), _failures(failures, trip.failed), trip.claimed, error)


@dataclass(frozen=True)
class Finished:
    """The answers of `finish_then_claim`: as finish_many's, and the jobs claimed after them
    (None when the claim failed: `claim_error`)."""

    completions: dict[int, Completion]
    failures: dict[int, Failure]
    claimed: list[ClaimedJob] | None
    claim_error: Exception | None


def _succeed_params(successes: Sequence[StoredSuccess], now: datetime | None) -> dict[str, Any]:
    ordered = sorted(successes, key=lambda s: s.lease.job_id)  # one lock order
    return success_params(
        [s.lease.job_id for s in ordered], [s.lease.token for s in ordered], [s.result_json for s in ordered], now
    )


def _succeed_statement(successes: Sequence[StoredSuccess], now: datetime | None) -> tuple[str, dict[str, Any]]:
    """succeed_many, or succeed_with_followups when some success creates jobs (migration 22)."""
    params = _succeed_params(successes, now)
    spawned = [(s.lease.job_id, s.followups) for s in sorted(successes, key=lambda s: s.lease.job_id) if s.followups]
    if not spawned:
        return "succeed_many", params
    return "succeed_followups", {**params, **followup_params(spawned)}


def _completions(successes: Sequence[StoredSuccess], done: Sequence[SucceedManyRow]) -> dict[int, Completion]:
    inserted = {r.id: r.inserted for r in done}
    return {
        s.lease.job_id: Completion.LEASE_LOST
        if s.lease.job_id not in inserted
        else Completion.CREATED
        if inserted[s.lease.job_id]
        else Completion.ALREADY_EXISTED
        for s in successes
    }


def _check_once(leases: Sequence[Lease]) -> None:
    ids = [lease.job_id for lease in leases]
    if len(set(ids)) != len(ids):
        raise InvalidArgument("leases", "name a job more than once", "pass each lease once")


def _fail_params(failures: Sequence[DecidedFailure], now: datetime | None) -> dict[str, Any]:
    return {
        "ids": [f.lease.job_id for f in failures],
        "tokens": [f.lease.token for f in failures],
        "states": [f.decision.state for f in failures],
        "reasons": [f.decision.reason.value if f.decision.reason else None for f in failures],
        "retry_delays": [f.decision.retry_delay for f in failures],
        "errors": [error_text(f.error) for f in failures],
        "now": now,
    }


def _failures(failures: Sequence[DecidedFailure], rows: Sequence[FailManyRow]) -> dict[int, Failure]:
    by_id = {r.id: r for r in rows}
    answers: dict[int, Failure] = {}
    for f in failures:
        row = by_id.get(f.lease.job_id)
        if row is None:
            answers[f.lease.job_id] = Failure(FailOutcome.LEASE_LOST)
        else:
            answers[f.lease.job_id] = failure_of(row.status, row.available_at)
    return answers
