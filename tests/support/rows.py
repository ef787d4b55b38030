"""Jobs in any state, made through the real Queue and its job-life functions (so each row is one
pgwork itself could leave), instead of raw INSERT/UPDATE in tests. Where no API reaches a state
(a retry made ready before its backoff ends) the raw SQL lives here, in one place.

    rows = Rows(queue)
    rows.succeeded(result={"ok": 1}, now=two_days_ago)   # completed_at two days ago
    job = rows.running(owner="w1", lease=300)            # a ClaimedJob, its lease held
"""

from __future__ import annotations

import itertools
from datetime import datetime
from typing import Any

import psycopg

from pgwork.db import Queue
from pgwork.models import ClaimedJob

_serial = itertools.count(1)


class Rows:
    def __init__(self, queue: Queue, job_type: str = "factory") -> None:
        self.queue = queue
        self.job_type = job_type

    def pending(
        self,
        *,
        job_type: str | None = None,
        payload: dict[str, Any] | None = None,
        now: datetime | None = None,
        **job: Any,
    ) -> int:
        """A job ready to run (or later, with delay= / available_at=). Other keywords go to enqueue."""
        return self.queue.enqueue(
            job_type or self.job_type, {"factory": next(_serial)} if payload is None else payload, now=now, **job
        )

    def scheduled(self, delay: float = 3600.0, **job: Any) -> int:
        return self.pending(delay=delay, **job)

    def running(
        self, *, owner: str = "factory-worker", lease: float = 30.0, now: datetime | None = None, **job: Any
    ) -> ClaimedJob:
        """A job claimed by `owner`: running, with a lease (token, expiry) and attempt_count 1."""
        job_id = self.pending(now=now, **job)
        job_type = job.get("job_type") or self.job_type
        claimed = self.queue.claim(owner, job_types=[job_type], limit=1, lease=lease, now=now)
        if [c.id for c in claimed] != [job_id]:
            raise AssertionError(
                f"Rows.running: claimed {[c.id for c in claimed]}, not the new job {job_id}; another ready "
                f"{job_type!r} job came first (give the factory a job_type of its own)"
            )
        return claimed[0]

    def retrying(self, *, error: str = "boom", delay: float = 60.0, now: datetime | None = None, **job: Any) -> int:
        """A job that failed once and waits `delay` seconds for its retry (pending, attempt_count 1)."""
        held = self.running(now=now, **job)
        self.queue.fail(held.lease, error, delay=delay, now=now)
        return held.id

    def succeeded(self, result: Any = None, *, now: datetime | None = None, **job: Any) -> int:
        """A finished job with its result written under its idempotency key (completed at `now`)."""
        held = self.running(now=now, **job)
        self.queue.succeed(held.lease, {"factory": held.id} if result is None else result, now=now)
        return held.id

    def dead(self, *, error: str = "gave up", now: datetime | None = None, **job: Any) -> int:
        """A job that failed for good (a non-retryable error), last_error kept."""
        held = self.running(now=now, **job)
        self.queue.fail(held.lease, error, retryable=False, now=now)
        return held.id

    def cancelled(self, *, now: datetime | None = None, **job: Any) -> int:
        """A pending job cancelled before it ran."""
        job_id = self.pending(now=now, **job)
        self.queue.cancel([job_id], now=now)
        return job_id

    def cancel_requested(self, *, now: datetime | None = None, **job: Any) -> ClaimedJob:
        """A running job whose cancellation was asked for; its holder sees it at the next heartbeat."""
        held = self.running(now=now, **job)
        self.queue.cancel([held.id], now=now)
        return held

    def ready_now(self, job_id: int) -> None:
        """Make a waiting job (a retry in its backoff, a scheduled job) ready at once: no API moves
        available_at earlier, and a test should not sleep through the backoff."""
        with psycopg.connect(self.queue.dsn, autocommit=True) as conn:
            conn.execute("UPDATE pgwork.jobs SET available_at = now() WHERE id = %s AND status = 'pending'", (job_id,))
