"""Finish some jobs and claim the next in one round trip and one commit: psycopg's pipeline mode.

The statements go out together and their answers come back together, in one transaction with a
savepoint between the finishes and the claim: `BEGIN; succeed_many/fail_many; SAVEPOINT; claim;
COMMIT`, then one Sync. One commit (one WAL flush) instead of two: a one-job worker paid two per
job. Fencing is untouched: the finishes are the same token-checked functions as pgwork.db.batches
runs one by one. The claim reads `now()`, the transaction's start, so the jobs it takes start at
the instant the finished ones completed (their leases a few milliseconds shorter at most).

Errors: once a statement fails the server skips the rest up to the Sync. A failed finish
therefore never claims, and the caller learns it as an exception (its job is still held, to be
written again the usual way). A claim that fails cannot undo the finishes: the transaction is
rolled back to the savepoint and the finishes committed alone (one more round trip, only then),
and the claim's error comes back as `claim_error` beside their answers. If that commit fails too,
nothing was written and the caller learns it as an exception, as for a failed finish.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg
from psycopg import Cursor, pq
from psycopg.types.json import Jsonb

from pgwork.db import statements
from pgwork.db.base import check_seconds
from pgwork.db.connect import AnyConnection
from pgwork.db.rows import ClaimRow, FailManyRow, SucceedManyRow
from pgwork.durations import MAX_LEASE_SECONDS
from pgwork.errors import InvalidArgument
from pgwork.models import ClaimedJob, Lease
from pgwork.validation import check_int, check_job_types, check_text


def claim_params(
    owner: str, job_types: Iterable[str] | None, limit: int, lease: float, now: datetime | None
) -> dict[str, Any]:
    """The claim's parameters, checked (bad values name the argument and the fix)."""
    check_text(owner, "owner", "use the pod or host name", max_chars=200)
    check_int(limit, "limit", 1, 10_000, "claim between 1 and 10000 jobs at once")
    if check_seconds(lease, "lease", MAX_LEASE_SECONDS) <= 0:
        raise InvalidArgument("lease", "must be > 0 seconds", "e.g. 30")
    return {"owner": owner, "job_types": check_job_types(job_types), "limit": limit, "lease": float(lease), "now": now}


def claimed_jobs(rows: Sequence[ClaimRow], owner: str) -> list[ClaimedJob]:
    claimed = [
        ClaimedJob(
            id=r.id,
            job_type=r.job_type,
            payload=r.payload,
            priority=r.priority,
            attempt=r.attempt_count,
            max_attempts=r.max_attempts,
            idempotency_key=r.idempotency_key,
            trace_context=r.trace_context or {},
            lease=Lease(r.id, r.lease_token, owner, r.attempt_count, r.max_attempts, r.job_type),
            lease_expires_at=r.lease_expires_at,
            created_at=r.created_at,
            last_error=r.last_error,
            timeout=r.timeout_seconds,
            checkpoint=r.checkpoint,
        )
        for r in rows
    ]
    # SKIP LOCKED returns rows in lock order, not priority order; callers expect the latter.
    claimed.sort(key=lambda j: (j.priority, j.id))
    return claimed


@dataclass(frozen=True)
class RoundTrip:
    """What one pipelined finish-and-claim did. The finishes committed; `claimed` is None when
    the claim did not (then `claim_error` says why)."""

    done: list[SucceedManyRow]
    failed: list[FailManyRow]
    claimed: list[ClaimedJob] | None
    claim_error: Exception | None


def finish_then_claim(
    conn: AnyConnection,
    succeed: dict[str, Any] | None,
    fail: dict[str, Any] | None,
    claim: dict[str, Any],
    *,
    succeed_statement: str = "succeed_many",
) -> RoundTrip:
    """Run succeed_many (`succeed` params; `succeed_statement` succeed_followups when some success
    creates jobs) and fail_many (`fail` params), then the claim behind a savepoint, in one
    transaction and one flush. Raises what the finishes (or their commit) raised: then nothing
    was written and nothing claimed."""
    done_cur = conn.cursor(row_factory=statements.row_factory(SucceedManyRow))
    failed_cur = conn.cursor(row_factory=statements.row_factory(FailManyRow))
    claim_cur = conn.cursor(row_factory=statements.row_factory(ClaimRow), binary=True)
    savepoint = conn.cursor()
    commit = conn.cursor()
    error: Exception | None = None
    try:
        with conn.pipeline():
            conn.execute("BEGIN")
            if succeed is not None:
                done_cur.execute(statements.statement(succeed_statement, "many"), succeed)
            if fail is not None:
                failed_cur.execute(statements.statement("fail_many", "many"), fail)
            savepoint.execute(f"SAVEPOINT {SAVEPOINT}")
            claim_cur.execute(statements.statement("claim", "many"), claim)
            commit.execute("COMMIT")
    except psycopg.Error as exc:
        # The first error of the pipeline: the finishes' own (nothing to keep), the claim's, or
        # the commit's (then the transaction is gone, finishes and all).
        if not _ok(savepoint, pq.ExecStatus.COMMAND_OK) or _ok(claim_cur, pq.ExecStatus.TUPLES_OK):
            _end(conn)
            raise
        error = exc
        _keep_finishes(conn)
    done = done_cur.fetchall() if succeed is not None else []
    failed = failed_cur.fetchall() if fail is not None else []
    if error is not None:
        return RoundTrip(done, failed, None, error)
    if not _ok(claim_cur, pq.ExecStatus.TUPLES_OK) or not _ok(commit, pq.ExecStatus.COMMAND_OK):
        return RoundTrip(done, failed, None, RuntimeError("the claim returned no result"))
    return RoundTrip(done, failed, claimed_jobs(claim_cur.fetchall(), claim["owner"]), None)


# Between the finishes and the claim; the name is the transaction's own, never seen outside it.
SAVEPOINT = "pgwork_claim"


def _keep_finishes(conn: AnyConnection) -> None:
    """After the claim failed: undo it alone and commit the finishes. Raises if that fails
    (nothing was written: the caller writes the finishes again the usual way)."""
    try:
        conn.execute(f"ROLLBACK TO SAVEPOINT {SAVEPOINT}")
        conn.execute("COMMIT")
    except psycopg.Error:
        _end(conn)
        raise


def _end(conn: AnyConnection) -> None:
    """End a failed transaction before the connection goes back to the pool (a broken connection
    is the pool's to discard)."""
    if conn.info.transaction_status in (pq.TransactionStatus.INTRANS, pq.TransactionStatus.INERROR):
        conn.rollback()


def _ok(cur: Cursor[Any], status: pq.ExecStatus) -> bool:
    result = cur.pgresult
    return result is not None and result.status == status


def success_params(ids: list[int], tokens: list[Any], results: list[str], now: datetime | None) -> dict[str, Any]:
    return {"ids": ids, "tokens": tokens, "results": [Jsonb(r, dumps=_identity) for r in results], "now": now}


def _identity(text: Any) -> str:
    return str(text)
