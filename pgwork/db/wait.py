"""Waiting for a job's outcome: LISTEN for its completion, polling as the fallback.

The waiter LISTENs on pgwork_finished (migration 0005 notifies one per job reaching succeeded,
dead or cancelled, at commit) on a connection of its own, never a pooled one: LISTEN state must
not leak into the pool, and behind a transaction-mode pooler LISTEN silently stops working, so
the outcome is also re-read every `poll` seconds. LISTEN is issued before the first read, so a
job finishing between the read and the wait is still heard.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import psycopg

from pgwork.db import statements
from pgwork.db.connect import aconnect, connect, first_error_line
from pgwork.db.rows import OutcomeRow
from pgwork.durations import check_seconds
from pgwork.errors import InvalidArgument, JobFailed, WaitTimeout
from pgwork.validation import check_id

FINISHED_CHANNEL = "pgwork_finished"


def check_wait(job_id: int, timeout: float, poll: float) -> int:
    """The job id, once the wait's arguments are sane (pure)."""
    check_id(job_id, "job_id")
    for value, name in ((timeout, "timeout"), (poll, "poll")):
        check_seconds(value, name, fix="e.g. 60")
    if poll <= 0:
        raise InvalidArgument("poll", "must be > 0 seconds", "e.g. 1; it is the fallback when no notification comes")
    return job_id


def settle(job_id: int, row: OutcomeRow | None) -> tuple[bool, Any]:
    """(True, result) once the job succeeded (the result None when waiting with result=False),
    (False, None) while it may still run; raises JobFailed for dead or cancelled and
    InvalidArgument for an unknown id (pure)."""
    if row is None:
        raise InvalidArgument("job_id", f"there is no job {job_id}", "pass an id that enqueue returned")
    if row.status == "succeeded":
        return True, row.result
    if row.status in ("dead", "cancelled"):
        raise JobFailed(job_id, row.status, row.attempt_count, row.last_error)
    return False, None


def outcome_query(result: bool) -> str:
    """job_outcome reads the result (producer profile); job_status only how the job ended (reader)."""
    return "job_outcome" if result else "job_status"


def refused(conn_user: str, exc: psycopg.errors.InsufficientPrivilege) -> InvalidArgument:
    return InvalidArgument(
        "result",
        f"role {conn_user!r} may not read job results ({first_error_line(exc)})",
        "grant it the producer profile, or wait with result=False, which needs only the reader profile",
    )


def wait_for_job(
    dsn: str,
    job_id: int,
    *,
    timeout: float,
    poll: float = 1.0,
    result: bool = True,
    application_name: str = "pgwork-wait",
    listen: bool = True,
) -> Any:
    """`listen=False` (through a transaction-mode pooler): no LISTEN and no prepared statements,
    the outcome is only re-read every `poll` seconds."""
    check_wait(job_id, timeout, poll)
    deadline = time.monotonic() + timeout
    want = str(job_id)
    query = outcome_query(result)
    with connect(dsn, application_name=application_name, prepare=listen) as conn:
        if listen:
            statements.execute(conn, "listen_finished")
        while True:
            try:
                row = statements.one(conn, query, {"id": job_id}, OutcomeRow)
            except psycopg.errors.InsufficientPrivilege as exc:
                raise refused(conn.info.user, exc) from None
            done, value = settle(job_id, row)
            if done:
                return value
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise WaitTimeout(job_id, timeout, row.status if row else "unknown")
            if not listen:
                time.sleep(min(poll, remaining))
                continue
            for notify in conn.notifies(timeout=min(poll, remaining)):
                if notify.payload == want:
                    break


async def await_job(
    dsn: str,
    job_id: int,
    *,
    timeout: float,
    poll: float = 1.0,
    result: bool = True,
    application_name: str,
    listen: bool = True,
) -> Any:
    """wait_for_job on an AsyncConnection of its own: the same loop, line for line on purpose (the
    decisions it makes are check_wait, outcome_query and settle, shared with the sync one)."""
    check_wait(job_id, timeout, poll)
    deadline = time.monotonic() + timeout
    want = str(job_id)
    query = outcome_query(result)
    async with await aconnect(dsn, application_name=application_name, prepare=listen) as conn:
        if listen:
            await statements.aexecute(conn, "listen_finished")
        while True:
            try:
                row = await statements.aone(conn, query, {"id": job_id}, OutcomeRow)
            except psycopg.errors.InsufficientPrivilege as exc:
                raise refused(conn.info.user, exc) from None
            done, value = settle(job_id, row)
            if done:
                return value
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise WaitTimeout(job_id, timeout, row.status if row else "unknown")
            if not listen:
                await asyncio.sleep(min(poll, remaining))
                continue
            async for notify in conn.notifies(timeout=min(poll, remaining)):
                if notify.payload == want:
                    break
