"""Finish some jobs and claim the next in one round trip and one commit: one simple-query message.

The statements go out as one text and their answers come back together, in one transaction with
a savepoint between the finishes and the claim: `BEGIN; succeed_many/fail_many; SAVEPOINT; claim;
COMMIT`. One commit (one WAL flush) instead of two: a one-job worker paid two per job. Fencing is
untouched: the finishes are the same token-checked functions as pgwork.db.batches runs one by one.
The claim reads `now()`, the transaction's start, so the jobs it takes start at the instant the
finished ones completed (their leases a few milliseconds shorter at most).

Why one message and not psycopg's pipeline mode (issue 28): the pipeline sent, dumped and read
five statements one by one, waiting on the socket seven times a job; one message is one send and
one read, and 40% less client CPU a job at batch 1 (the claim's answer then comes back as text,
which at up to 10 rows costs no more). The arguments are bound into the text as literals quoted
by libpq for the connection's encoding and the server's rules (pgwork.db.literals; psycopg's
ClientCursor.mogrify for any value that does not write), and no statement is prepared, so the
message also passes a transaction-mode pooler as it is.

Errors: once a statement fails the server skips the rest. A failed finish therefore never claims,
and the caller learns it as an exception (its job is still held, to be written again the usual
way). A claim that fails cannot undo the finishes: the transaction is rolled back to the savepoint
and the finishes committed alone (one more round trip, only then), and the claim's error comes
back as `claim_error` beside their answers. If that commit fails too, nothing was written and the
caller learns it as an exception, as for a failed finish.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

import psycopg
from psycopg import ClientCursor, abc, generators, pq
from psycopg.adapt import Transformer

from pgwork.db import literals, statements
from pgwork.db.base import check_seconds
from pgwork.db.connect import AnyConnection
from pgwork.db.rows import ClaimRow, FailManyRow, SucceedManyRow
from pgwork.durations import MAX_LEASE_SECONDS
from pgwork.errors import InvalidArgument
from pgwork.models import ClaimedJob, Lease
from pgwork.validation import check_int, check_job_types, check_text

T = TypeVar("T")


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
    # Frozen dataclasses, filled without their __init__: a frozen one sets each field through
    # object.__setattr__ (3.0 us for a ClaimedJob and its Lease; 0.8 us so), and neither has a
    # __post_init__ to skip. Equality, hashing and repr read the same fields (issue 28).
    new, claimed = object.__new__, []
    for r in rows:
        lease = new(Lease)
        lease.__dict__.update(
            job_id=r.id,
            token=r.lease_token,
            owner=owner,
            attempt=r.attempt_count,
            max_attempts=r.max_attempts,
            job_type=r.job_type,
        )
        job = new(ClaimedJob)
        job.__dict__.update(
            id=r.id,
            job_type=r.job_type,
            payload=r.payload,
            priority=r.priority,
            attempt=r.attempt_count,
            max_attempts=r.max_attempts,
            idempotency_key=r.idempotency_key,
            trace_context=r.trace_context or {},
            lease=lease,
            lease_expires_at=r.lease_expires_at,
            created_at=r.created_at,
            last_error=r.last_error,
            timeout=r.timeout_seconds,
            checkpoint=r.checkpoint,
        )
        claimed.append(job)
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
    transaction and one message. Raises what the finishes (or their commit) raised: then nothing
    was written and nothing claimed."""
    binder = ClientCursor(conn)
    parts = [b"BEGIN"]
    if succeed is not None:
        parts.append(_bound(binder, INLINE.get(succeed_statement, succeed_statement), succeed))
    if fail is not None:
        parts.append(_bound(binder, "fail_many", fail))
    parts += [f"SAVEPOINT {SAVEPOINT}".encode(), _bound(binder, "claim", claim), b"COMMIT"]
    try:
        with conn.lock:
            conn.pgconn.send_query(b";\n".join(parts))
            results = conn.wait(generators.execute(conn.pgconn))
    except BaseException:
        _end(conn)
        raise
    # One answer per statement up to the first that failed; the server skipped the rest.
    claim_at = len(parts) - 2
    failed_at = next((i for i, r in enumerate(results) if r.status not in _OK), None)
    if failed_at is not None and failed_at != claim_at:
        error = _error(conn, results[failed_at])
        _end(conn)  # a finish (or BEGIN) failed, or the commit did: nothing was written
        raise error
    if failed_at is None and len(results) != len(parts):  # never seen: counted as not written
        _end(conn)
        raise psycopg.InternalError(f"{len(results)} answers to {len(parts)} statements")
    tx = _transformer(conn)
    done = _rows(tx, results[1], SucceedManyRow) if succeed is not None else []
    failed = _rows(tx, results[claim_at - 2], FailManyRow) if fail is not None else []
    if failed_at is not None:
        _keep_finishes(conn)
        return RoundTrip(done, failed, None, _error(conn, results[failed_at]))
    return RoundTrip(done, failed, claimed_jobs(_rows(tx, results[claim_at], ClaimRow), claim["owner"]), None)


# Between the finishes and the claim; the name is the transaction's own, never seen outside it.
SAVEPOINT = "pgwork_claim"
# The statements whose arguments travel in binary alone, by the form that takes them bound into
# its text (a simple-query message carries no separate arguments).
INLINE = {"succeed_many": "succeed_many_inline"}
_OK = (pq.ExecStatus.COMMAND_OK, pq.ExecStatus.TUPLES_OK)


def _bound(binder: ClientCursor[Any], name: str, params: dict[str, Any]) -> bytes:
    """The named statement with `params` bound into its text as literals quoted by the server's
    own rules (the connection's encoding and standard_conforming_strings): by pgwork.db.literals
    where it writes every argument, else by psycopg's mogrify."""
    text = statements.statement(name, "many")
    conn = binder.connection
    encoding = conn.info.encoding
    bound = literals.bind(text, params, pq.Escaping(conn.pgconn).escape_literal, encoding)
    return bound if bound is not None else binder.mogrify(text, params).encode(encoding)


# Per connection, with the session's TimeZone when it was made: a Transformer makes each column's
# loader once and keeps it (a timestamptz loader reads the zone then), where a new one made them
# again for every answer (issue 28: a fifth of decoding a one-job claim).
_TRANSFORMERS: weakref.WeakKeyDictionary[AnyConnection, tuple[bytes | None, abc.Transformer]] = (
    weakref.WeakKeyDictionary()
)


def _transformer(conn: AnyConnection) -> abc.Transformer:
    zone = conn.pgconn.parameter_status(b"TimeZone")
    kept = _TRANSFORMERS.get(conn)
    if kept is None or kept[0] != zone:
        kept = (zone, Transformer(conn))
        _TRANSFORMERS[conn] = kept
    return kept[1]


def _rows(tx: abc.Transformer, res: pq.abc.PGresult, row: type[T]) -> list[T]:
    tx.set_pgresult(res)
    return tx.load_rows(0, res.ntuples, statements.positional(row, res))


def _error(conn: AnyConnection, res: pq.abc.PGresult) -> psycopg.Error:
    return psycopg.errors.error_from_result(res, encoding=conn.info.encoding)


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


def success_params(ids: list[int], tokens: list[Any], results: list[str], now: datetime | None) -> dict[str, Any]:
    """`results`: each job's result as JSON text, made once by the worker (outcome.result_json);
    the statements cast them (`::jsonb[]`), so they go as texts, bound or written as literals."""
    return {"ids": ids, "tokens": tokens, "results": results, "now": now}
