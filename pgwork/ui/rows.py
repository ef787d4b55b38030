"""The rows the console reads (pgwork/ui/sql/console.sql), mapped by column name."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True)
class May:
    """What the connecting role may do, as the database decides (its profiles' grants)."""

    read_contents: bool
    act: bool
    role: str


@dataclass(frozen=True)
class FoundJob:
    """One job as pgwork.find_jobs returns it: its life, not its payload or result."""

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
    error_length: int | None
    idempotency_key: str
    timeout_seconds: float | None
    progress: float | None
    progress_note: str | None
    progress_at: datetime | None
    checkpoint_at: datetime | None
    trace_id: str | None
    now: datetime


@dataclass(frozen=True)
class Bucket:
    bucket_start: datetime
    finished: int
    dead: int


@dataclass(frozen=True)
class ActionRow:
    id: int
    at: datetime
    actor: str
    db_role: str
    action: str
    target: str
    jobs: int
    outcome: str
