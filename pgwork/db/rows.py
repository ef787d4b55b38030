"""The rows pgwork's statements return, one frozen dataclass per shape, fields named as the
columns (pgwork.db.statements maps them by name, so a renamed column fails loudly)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple


@dataclass(frozen=True)
class JobRow:
    """One job as stored (`Queue.job`). payload and trace_context may be Undecodable markers."""

    id: int
    job_type: str
    payload: Any
    status: str
    priority: int
    attempt_count: int
    max_attempts: int
    created_at: datetime
    available_at: datetime
    started_at: datetime | None
    completed_at: datetime | None
    lease_owner: str | None
    lease_token: uuid.UUID | None
    lease_expires_at: datetime | None
    heartbeat_at: datetime | None
    cancel_requested_at: datetime | None
    last_error: str | None
    idempotency_key: str
    trace_context: Any
    timeout_seconds: float | None = None
    progress: float | None = None
    progress_note: str | None = None
    progress_at: datetime | None = None
    checkpoint: Any = None
    checkpoint_at: datetime | None = None


@dataclass(frozen=True)
class JobDetail:
    """One job's life without its contents (`Queue.job_detail`, any reader): the effective lease
    and heartbeat, progress, the checkpoint's age, whether a result exists, the trace id.
    `now` is the server's clock when read, for ages; `may_read_contents` whether the connecting
    role may read payload, checkpoint and result (`Queue.job_contents`)."""

    id: int
    job_type: str
    status: str
    priority: int
    attempt_count: int
    max_attempts: int
    created_at: datetime
    available_at: datetime
    started_at: datetime | None
    completed_at: datetime | None
    lease_owner: str | None
    lease_expires_at: datetime | None
    heartbeat_at: datetime | None
    cancel_requested_at: datetime | None
    last_error: str | None
    idempotency_key: str
    is_unique: bool
    timeout_seconds: float | None
    progress: float | None
    progress_note: str | None
    progress_at: datetime | None
    checkpoint_at: datetime | None
    has_result: bool
    trace_id: str | None
    now: datetime
    may_read_contents: bool


@dataclass(frozen=True)
class JobContents:
    """A job's payload, checkpoint and result (None until it succeeded): producers and workers."""

    payload: Any
    checkpoint: Any
    result: Any


@dataclass(frozen=True)
class TakenRow:
    job_type: str
    taken_at: datetime | None


@dataclass(frozen=True)
class EnqueuedRow:
    ord: int
    id: int
    created: bool
    status: str


@dataclass(frozen=True)
class OutcomeRow:
    """How a job stands, for a waiter (`job_outcome`): the result only once it succeeded."""

    id: int
    status: str
    attempt_count: int
    last_error: str | None
    result: Any


@dataclass(frozen=True)
class ResultRow:
    """A job's effect, written once per idempotency key (`Queue.result`)."""

    idempotency_key: str
    job_id: int
    job_type: str
    produced_by: str
    produced_at: datetime
    result: Any


@dataclass(frozen=True)
class RunningRow:
    id: int
    job_type: str
    lease_owner: str
    attempt_count: int
    max_attempts: int
    started_at: datetime | None
    lease_remaining_seconds: float
    since_heartbeat_seconds: float
    cancel_requested: bool
    progress: float | None
    progress_note: str | None
    since_progress_seconds: float | None
    since_checkpoint_seconds: float | None


@dataclass(frozen=True)
class RetryingRow:
    id: int
    job_type: str
    attempt_count: int
    max_attempts: int
    retry_in_seconds: float
    last_error: str | None


@dataclass(frozen=True)
class DeadRow:
    id: int
    job_type: str
    attempt_count: int
    max_attempts: int
    completed_at: datetime
    last_error: str | None


# -- what the job-life functions answer (internal to pgwork.db) ---------------------------


@dataclass(frozen=True)
class IdRow:
    id: int


class ClaimRow(NamedTuple):
    """A claimed job's row. A named tuple, not a dataclass: the worker decodes up to thousands a
    second, and a frozen dataclass's __init__ (15 setattr calls through object) cost a third of
    the decode (issue 28). statements.row_factory checks the columns against these names first."""

    id: int
    job_type: str
    payload: Any
    priority: int
    attempt_count: int
    max_attempts: int
    idempotency_key: str
    trace_context: Any
    lease_owner: str
    lease_token: uuid.UUID
    lease_expires_at: datetime
    created_at: datetime
    last_error: str | None
    timeout_seconds: float | None = None
    checkpoint: Any = None


@dataclass(frozen=True)
class HeartbeatRow:
    id: int | None  # None: the worker lease's own row (migration 0015)
    cancel_requested: bool
    lease_expires_at: datetime | None


@dataclass(frozen=True)
class SucceedRow:
    fenced: int
    inserted: int


class SucceedManyRow(NamedTuple):
    """One job a batch's write marked succeeded. A named tuple, built by position (as ClaimRow):
    the finisher reads one per job."""

    id: int
    inserted: bool


@dataclass(frozen=True)
class FailRow:
    status: str
    available_at: datetime
    attempt_count: int
    max_attempts: int


@dataclass(frozen=True)
class CancelRow:
    id: int
    was: str


@dataclass(frozen=True)
class OwnerCount:
    owner: str
    jobs: int


@dataclass(frozen=True)
class ConnectionLimits:
    """The server's connection slots: max_connections, and those only superusers (and, on 16+,
    roles with pg_use_reserved_connections) may take."""

    max_connections: int
    reserved: int


@dataclass(frozen=True)
class LockHolder:
    pid: int
    application_name: str
    held_s: int


@dataclass(frozen=True)
class RoleFacts:
    rolname: str
    rolsuper: bool
    has_owner_rights: bool


@dataclass(frozen=True)
class PruneBatchRow:
    deleted: int
    through: datetime | None


@dataclass(frozen=True)
class Rotated:
    """What pgwork.rotate_ready did to one segment: truncated (after moving `moved` live rows),
    busy (its lock not had in 20 ms), thinned (over move_limit rows: `moved` of them went forward
    under row locks, no table lock), or full (over 10 x move_limit: a backlog, left unlocked)."""

    segment: int
    outcome: str
    moved: int


class FailManyRow(NamedTuple):
    """One job a batch's write marked failed (a named tuple, as SucceedManyRow)."""

    id: int
    status: str
    available_at: datetime


@dataclass(frozen=True)
class CheckpointRow:
    id: int
    checkpoint_at: datetime


@dataclass(frozen=True)
class ScheduleOpenRow:
    watermark: datetime
    last_tick: datetime | None
    now_at: datetime


@dataclass(frozen=True)
class ScheduleTickRow:
    tick_at: datetime
    job_id: int


@dataclass(frozen=True)
class ScheduleRow:
    """A schedule as last fired (`pgwork schedules`, the JobQueue status)."""

    name: str
    cron: str
    time_zone: str
    job_type: str
    missed: str
    last_tick: datetime | None
    last_job_id: int | None
    next_tick: datetime | None
    skipped_ticks: int
    fired_at: datetime


@dataclass(frozen=True)
class ArchiveBatchRow:
    """One `pgwork.archive_batch` call: jobs it moved into history, and the completed_at it reached (the
    next batch starts after it)."""

    moved: int
    through: datetime | None
