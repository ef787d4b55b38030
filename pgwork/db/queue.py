"""The Queue: the façade every other part of pgwork uses to reach PostgreSQL.

Every method is one short transaction (most are one statement, run in autocommit) so no
transaction ever stays open while a job's work runs. Writes about a running job are fenced by
its per-claim lease token. Statements come from `pgwork/sql/queries.sql` by name and row shape.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from psycopg.types.json import Jsonb

from pgwork.db.base import check_seconds
from pgwork.db.batches import Batches
from pgwork.db.bulk import BULK_THRESHOLD, copy_enqueue, copy_load, validated
from pgwork.db.checkpoints import Checkpoints
from pgwork.db.connect import AnyConnection
from pgwork.db.history import History
from pgwork.db.limits import Limits
from pgwork.db.maintenance import Maintenance
from pgwork.db.params import any_after, any_unique, identity, unique_params, unnest_params
from pgwork.db.pipelines import Pipelines
from pgwork.db.renewals import Renewals
from pgwork.db.roundtrip import claim_params, claimed_jobs
from pgwork.db.rows import (
    ClaimRow,
    EnqueuedRow,
    FailRow,
    IdRow,
    SucceedManyRow,
    SucceedRow,
)
from pgwork.db.schedules import Schedules
from pgwork.errors import InvalidArgument
from pgwork.failure import decide_failure
from pgwork.jsonshape import result_json
from pgwork.models import (
    ClaimedJob,
    Completion,
    Enqueued,
    FailOutcome,
    Failure,
    Lease,
    LeaseState,
    NewJob,
    failure_of,
)
from pgwork.progress import Progress
from pgwork.validation import (
    error_text,
    validate,
)


class Queue(Batches, Limits, Checkpoints, Renewals, Schedules, Pipelines, Maintenance, History):
    """All database I/O for pgwork, over a small connection pool.

    Methods take an optional `now` (tests pass a fixed instant instead of sleeping); every write
    also takes an optional `conn`: with one, the statement runs on it and is committed (or not)
    by the caller, so a write can share the caller's own transaction.
    """

    # -- producing ------------------------------------------------------------------------

    def enqueue(
        self,
        job_type: str,
        payload: dict[str, Any] | None = None,
        *,
        key: str | None = None,
        priority: int = 100,
        delay: float | None = None,
        available_at: datetime | None = None,
        max_attempts: int = 5,
        trace_context: dict[str, str] | None = None,
        timeout: float | str | timedelta | None = None,
        unique: bool = False,
        after: Sequence[int | str] = (),
        on_parent_failure: str = "cancel",
        conn: AnyConnection | None = None,
        now: datetime | None = None,
    ) -> int:
        """Add one job; returns its id. With `conn`, the job exists iff the caller commits.
        `timeout` (seconds, "10m", or a timedelta) overrides its handler's hard timeout. With
        `unique`, a key that already has a pending, running or succeeded unique job adds nothing
        and that job's id is returned (`enqueue_outcomes` also says which happened). With `after`
        (job ids or keys) it waits until those jobs succeeded; `on_parent_failure="run"` runs it
        anyway once every parent ended, dead or cancelled ones included (docs/queue.md, Pipelines)."""
        payload = {} if payload is None else payload
        job = NewJob(
            job_type,
            payload,
            key,
            priority,
            delay,
            available_at,
            max_attempts,
            trace_context or {},
            timeout,
            unique,
            after,
            on_parent_failure,
        )
        return self.enqueue_many([job], conn=conn, now=now)[0]

    def enqueue_outcomes(
        self, jobs: Iterable[NewJob], *, conn: AnyConnection | None = None, now: datetime | None = None
    ) -> list[Enqueued]:
        """enqueue_many (at most BULK_THRESHOLD jobs) saying for each job whether it was created
        or its unique key was taken already, and by which job in which status."""
        rows = list(validated(jobs, self.max_payload_bytes))
        if len(rows) > BULK_THRESHOLD:
            raise InvalidArgument(
                "jobs", f"{len(rows)} jobs at once", f"pass at most {BULK_THRESHOLD} per call (or use enqueue_many)"
            )
        if not rows:
            return []
        if any_after(rows):
            return [Enqueued(r.id, True, r.status) for r in self._enqueue_after(rows, now, conn)]
        if not any_unique(rows):
            # The plain statement: only the producer's column INSERT, as enqueue_many.
            plain = self._many("enqueue", unnest_params(rows, now), IdRow, conn)
            return [Enqueued(r.id, True, "pending") for r in plain]
        found = self._many("enqueue_unique", unique_params(rows, now), EnqueuedRow, conn)
        return [Enqueued(r.id, r.created, r.status) for r in found]

    def enqueue_many(
        self,
        jobs: Iterable[NewJob],
        *,
        conn: AnyConnection | None = None,
        now: datetime | None = None,
        on_progress: Callable[[int], None] | None = None,
    ) -> list[int]:
        """Add many jobs, all or none: one bad job (InvalidArgument naming its field and its place
        in the batch) writes none. Returns the ids in input order. Past BULK_THRESHOLD jobs they go
        through COPY (pgwork.db.bulk), streamed as they are validated, so `jobs` may be a generator
        of millions; `on_progress(n)` hears how many have been sent so far. With `conn`, the jobs
        exist iff the caller commits."""
        iterator = iter(jobs)
        head = list(itertools.islice(iterator, BULK_THRESHOLD + 1))
        if len(head) > BULK_THRESHOLD and any(getattr(j, "after", ()) for j in head):
            # Parents are wired by enqueue_after (up to 10000 jobs in its one statement), not COPY.
            wired = list(validated(itertools.chain(head, iterator), self.max_payload_bytes))
            return [r.id for r in self._enqueue_after(wired, now, conn)]
        if len(head) > BULK_THRESHOLD:
            rows = validated(itertools.chain(head, iterator), self.max_payload_bytes)
            with self._pool.connection(conn) as c:
                return copy_enqueue(c, rows, now=now, on_progress=on_progress)
        if not head:
            return []
        # A lone job's error needs no place in a batch (enqueue's errors read as before).
        limit = self.max_payload_bytes
        small = list(validated(head, limit)) if len(head) > 1 else [validate(head[0], limit)]
        if any_after(small):
            ids = [r.id for r in self._enqueue_after(small, now, conn)]
        elif any_unique(small):
            ids = [r.id for r in self._many("enqueue_unique", unique_params(small, now), EnqueuedRow, conn)]
        else:
            ids = [r.id for r in self._many("enqueue", unnest_params(small, now), IdRow, conn)]
        if on_progress is not None:
            on_progress(len(ids))
        return ids

    def load_jobs(
        self,
        jobs: Iterable[NewJob],
        *,
        conn: AnyConnection | None = None,
        now: datetime | None = None,
        on_progress: Callable[[int], None] | None = None,
    ) -> int:
        """enqueue_many for backfills that need no ids back: COPY straight into the jobs table, the
        server writing while the client still validates (the fastest path; see pgwork.db.bulk).
        All or none, as enqueue_many; returns how many jobs were added."""
        rows = validated(jobs, self.max_payload_bytes)
        with self._pool.connection(conn) as c:
            return copy_load(c, rows, now=now, on_progress=on_progress)

    # -- the job's life -------------------------------------------------------------------

    def claim(
        self,
        owner: str,
        *,
        job_types: Iterable[str] | None = None,
        limit: int = 1,
        lease: float = 30.0,
        now: datetime | None = None,
        conn: AnyConnection | None = None,
    ) -> list[ClaimedJob]:
        """Claim up to `limit` ready jobs in one statement, committed before returning."""
        params = claim_params(owner, job_types, limit, lease, now)
        return claimed_jobs(self._many("claim", params, ClaimRow, conn, binary=True), owner)

    def heartbeat(
        self,
        lease: Lease,
        *,
        lease_seconds: float = 30.0,
        now: datetime | None = None,
        conn: AnyConnection | None = None,
    ) -> LeaseState:
        return self.heartbeat_many([lease], lease_seconds=lease_seconds, now=now, conn=conn)[lease.job_id]

    def heartbeat_many(
        self,
        leases: Sequence[Lease],
        *,
        lease_seconds: float = 30.0,
        now: datetime | None = None,
        conn: AnyConnection | None = None,
        progress: Mapping[int, Progress] | None = None,
    ) -> dict[int, LeaseState]:
        """Renew many leases in one statement; says for each job whether it is still held.
        `progress` (by job id, checked by pgwork.progress.check_progress) is stored with the
        renewal of the jobs it names, fenced by the same tokens: no statement of its own.
        (`renew` does the same riding on a worker lease.)"""
        return self.renew(leases, lease_seconds=lease_seconds, now=now, conn=conn, progress=progress).states

    def succeed(
        self, lease: Lease, result: Any, *, conn: AnyConnection | None = None, now: datetime | None = None
    ) -> Completion:
        """Mark succeeded and write the result under the job's idempotency key, both fenced.

        With `conn` the caller can write its own business rows in the same transaction.
        """
        # Serialise here, so a bad result fails before any statement is sent.
        result_jsonb = Jsonb(result_json(result), dumps=identity)
        params = {"id": lease.job_id, "token": lease.token, "result": result_jsonb, "now": now}
        row = self._one("succeed", params, SucceedRow, conn)
        if row is None or not row.fenced:
            return Completion.LEASE_LOST
        return Completion.CREATED if row.inserted else Completion.ALREADY_EXISTED

    def succeed_many(
        self,
        completions: Sequence[tuple[Lease, Any]],
        *,
        conn: AnyConnection | None = None,
        now: datetime | None = None,
    ) -> dict[int, Completion]:
        """`succeed` for many jobs in one statement (one commit): each is fenced by its own token
        and writes its result once per idempotency key, exactly as `succeed` would one by one."""
        if not completions:
            return {}
        ids = [lease.job_id for lease, _ in completions]
        if len(set(ids)) != len(ids):
            raise InvalidArgument("completions", "names a job more than once", "pass each lease once")
        results = [Jsonb(result_json(result), dumps=identity) for _, result in completions]
        params = {"ids": ids, "tokens": [lease.token for lease, _ in completions], "results": results, "now": now}
        rows = self._many("succeed_many", params, SucceedManyRow, conn)
        held = {r.id: r.inserted for r in rows}
        return {
            job_id: Completion.LEASE_LOST
            if job_id not in held
            else Completion.CREATED
            if held[job_id]
            else Completion.ALREADY_EXISTED
            for job_id in ids
        }

    def fail(
        self,
        lease: Lease,
        error: str,
        *,
        retryable: bool = True,
        delay: float | None = None,
        now: datetime | None = None,
        conn: AnyConnection | None = None,
    ) -> Failure:
        """Record a failed attempt: retry after a backoff (the job type's own, from `backoffs`,
        else `backoff`) while attempts remain, else dead.

        Decided here (pgwork.failure.decide_failure), applied by pgwork.set_state_if_held only
        while the lease holds and within its bounds: a retry past the attempt budget is applied
        as dead, whatever the caller asks; a non-retryable error goes dead at once."""
        backoff = self.backoff_for(lease.job_type)
        retry_in = backoff.delay(lease.attempt) if delay is None else check_seconds(delay, "delay")
        # A lease made by hand does not know the budget: ask for the retry, the database says.
        budget = lease.max_attempts if lease.max_attempts is not None else _SMALLINT_MAX
        decision = decide_failure(lease.attempt, budget, retryable, retry_in, now or datetime.now(UTC))
        params = {
            "id": lease.job_id,
            "token": lease.token,
            "state": decision.state,
            "reason": decision.reason.value if decision.reason else None,
            "retry_delay": decision.retry_delay,
            "error": error_text(error),
            "now": now,
        }
        row = self._one("set_state_if_held", params, FailRow, conn)
        if row is None:
            return Failure(FailOutcome.LEASE_LOST)
        return failure_of(row.status, row.available_at)

    def release(
        self,
        lease: Lease,
        note: str = "released by its worker",
        *,
        now: datetime | None = None,
        conn: AnyConnection | None = None,
    ) -> bool:
        """Give a job back to pending (graceful shutdown). False if the lease was already lost
        or the job's cancellation was requested (acknowledge that instead)."""
        stamp = f"[{error_text(note)} ({lease.owner}, attempt {lease.attempt})]"
        params = {"id": lease.job_id, "token": lease.token, "note": stamp, "now": now}
        return self._one("release", params, IdRow, conn) is not None

    def acknowledge_cancel(
        self, lease: Lease, *, now: datetime | None = None, conn: AnyConnection | None = None
    ) -> bool:
        """The holder stops a job whose cancellation was requested and marks it cancelled."""
        stamp = f"[cancelled while running on {lease.owner}, attempt {lease.attempt}]"
        params = {"id": lease.job_id, "token": lease.token, "note": stamp, "now": now}
        return self._one("acknowledge_cancel", params, IdRow, conn) is not None


# attempt_count and max_attempts are smallint columns.
_SMALLINT_MAX = 32767


def new_token() -> uuid.UUID:
    """A lease token as the database would mint it; for tests that forge stale leases."""
    return uuid.uuid4()
