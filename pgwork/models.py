"""The values that cross the Queue's boundary. Plain frozen dataclasses, no I/O."""

from __future__ import annotations

import enum
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

JsonObject = dict[str, Any]


@dataclass(frozen=True)
class NewJob:
    """A job to enqueue. `key` defaults to one derived from the work (see pgwork.keys)."""

    job_type: str
    payload: JsonObject = field(default_factory=dict)
    key: str | None = None
    priority: int = 100
    delay: float | None = None
    available_at: datetime | None = None
    max_attempts: int = 5
    trace_context: dict[str, str] = field(default_factory=dict)
    # A hard timeout for this job, overriding its handler's: seconds, a duration like "10m", or
    # a timedelta (None: the handler's, or none).
    timeout: float | str | timedelta | None = None
    # Skip this job, answering the existing one's id, when its key already has a unique job that
    # is pending, running or succeeded (docs/queue.md, Uniqueness). Enforced by a unique index.
    unique: bool = False
    # Parents: ids, or idempotency keys (docs/queue.md, Pipelines). The job waits ('waiting')
    # until every parent succeeded, then becomes pending; a parent that ends dead or cancelled
    # cancels it. A key names an earlier job of the same call, a live unique job, or a stored result.
    after: Sequence[int | str] = ()
    # What a parent that ends dead or cancelled does to this job: "cancel" (the default) cancels
    # it, naming the parent in last_error, and retrying the parent revives it; "run" counts that
    # parent as ended, so the job runs once every parent has ended, and job.failed_parents()
    # says which did not succeed. A retried parent never runs such a job twice.
    on_parent_failure: str = "cancel"


@dataclass(frozen=True)
class Enqueued:
    """What an enqueue did with one job: the id of the job that stands for it, whether this call
    created it (False: a unique job's key was taken), and that job's status."""

    id: int
    created: bool
    status: str


@dataclass(frozen=True)
class Lease:
    """Proof of a claim. Every write about a running job is fenced by `token`."""

    job_id: int
    token: uuid.UUID
    owner: str
    attempt: int
    # The job's attempt budget as the claim saw it (None: unknown, e.g. a lease made by hand);
    # the database enforces the budget either way.
    max_attempts: int | None = None
    # The claimed job's type, so a failure is spaced by that type's own backoff (None: unknown).
    job_type: str | None = None


@dataclass(frozen=True)
class ClaimedJob:
    id: int
    job_type: str
    payload: JsonObject
    priority: int
    attempt: int
    max_attempts: int
    idempotency_key: str
    trace_context: dict[str, str]
    lease: Lease
    lease_expires_at: datetime
    created_at: datetime
    last_error: str | None
    # The job's own timeout in seconds, as stored (None: its handler's, or none).
    timeout: float | None = None
    # What the job's last checkpoint saved (pgwork.progress), for this attempt to resume from;
    # None when no earlier attempt saved one.
    checkpoint: Any = None


class LeaseState(enum.Enum):
    HELD = "held"
    CANCEL_REQUESTED = "cancel_requested"
    LOST = "lost"


@dataclass(frozen=True)
class WorkerLease:
    """A worker's registration (pgwork.register_worker): its owner name and the secret that
    renews it. The secret is the worker's alone: never shown (repr) or logged."""

    owner: str
    secret: uuid.UUID = field(repr=False)


@dataclass(frozen=True)
class Renewal:
    """What one heartbeat answered: each lease's state, and whether the worker lease passed with
    it still holds (None: none was passed; False: its secret no longer matches, register again)."""

    states: dict[int, LeaseState]
    registered: bool | None


class Completion(enum.Enum):
    """What a fenced success did."""

    CREATED = "created"  # the result row is new
    ALREADY_EXISTED = "already_existed"  # another run wrote the effect first; job still succeeded
    LEASE_LOST = "lease_lost"  # the token no longer holds the job: nothing was written


class FailOutcome(enum.Enum):
    RETRY = "retry"
    DEAD = "dead"
    CANCELLED = "cancelled"  # its cancellation was requested while it ran: not retried (migration 13)
    LEASE_LOST = "lease_lost"


@dataclass(frozen=True)
class Failure:
    outcome: FailOutcome
    available_at: datetime | None = None


_FAILED_TO = {"pending": FailOutcome.RETRY, "dead": FailOutcome.DEAD, "cancelled": FailOutcome.CANCELLED}


def failure_of(status: str, available_at: datetime) -> Failure:
    """The answer of a fenced failure (set_state_if_held, fail_many) from the state it left the
    row in; the time it is due again only for a retry."""
    outcome = _FAILED_TO[status]
    return Failure(outcome, available_at if outcome is FailOutcome.RETRY else None)


@dataclass(frozen=True)
class Reclaimed:
    id: int
    job_type: str
    previous_owner: str
    attempt_count: int
    status: str  # pending, or dead when attempts ran out, or cancelled when cancellation was asked
    overdue_seconds: float


@dataclass(frozen=True)
class TypeStats:
    job_type: str
    ready: int
    scheduled: int
    retrying: int
    running: int
    dead: int
    oldest_wait_seconds: float
    max_heartbeat_age_seconds: float
    # Counts stop at `cap` (None: exact): a count equal to it means "at least cap".
    cap: int | None = None
    # The type's fleet-wide limit (pgwork.limits), None where it has none.
    max_running: int | None = None
    rate_count: int | None = None
    rate_seconds: float | None = None

    def lower_bounds(self) -> tuple[str, ...]:
        """The counts that reached the cap, so are lower bounds (pure)."""
        if self.cap is None:
            return ()
        return tuple(name for name in COUNTS if getattr(self, name) >= self.cap)


COUNTS = ("ready", "scheduled", "retrying", "running", "dead")


@dataclass(frozen=True)
class CancelReport:
    cancelled: list[int]  # were pending: now cancelled
    requested: list[int]  # were running: the holder will stop at its next heartbeat
    not_cancellable: list[int]  # finished already, or no such job


@dataclass(frozen=True)
class PruneProgress:
    """One committed prune batch: its status, rows deleted by it and so far (all statuses), and
    how long its transaction took."""

    status: str
    deleted: int
    total: int
    seconds: float
