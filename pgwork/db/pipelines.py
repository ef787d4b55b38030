"""The Queue's pipelines (migration 22): jobs that wait for parents, a child's view of its parents'
results, and a job's family for `pgwork job show`. Split from pgwork.db.queue only to keep
modules small; the follow-ups of a finish are in pgwork.db.batches."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from psycopg import errors

from pgwork.db.base import QueueBase
from pgwork.db.connect import AnyConnection
from pgwork.db.params import after_params
from pgwork.errors import InvalidArgument
from pgwork.quoting import inert
from pgwork.validation import JobRow, check_id, check_int


@dataclass(frozen=True)
class AfterRow:
    """One job enqueue_after added: its place in the call, its id, and waiting or pending."""

    ord: int
    id: int
    status: str


@dataclass(frozen=True)
class ParentResult:
    """One parent of a job: its id, type, status and result (None unless it succeeded)."""

    parent_id: int
    job_type: str
    status: str
    result: Any


@dataclass(frozen=True)
class Relative:
    """A job's parent or child, as `pgwork job show` lists it (no contents)."""

    relation: str  # 'parent' or 'child'
    id: int
    job_type: str
    status: str
    blocked_by: int | None


@dataclass(frozen=True)
class WaitingCount:
    job_type: str
    waiting: int


class Pipelines(QueueBase):
    def _enqueue_after(
        self, rows: Sequence[JobRow], now: datetime | None, conn: AnyConnection | None
    ) -> list[AfterRow]:
        """Jobs, some with parents, in one statement (all or none). A parent that does not exist,
        is dead or cancelled, or a key that names no job is InvalidArgument naming `after`."""
        try:
            return self._many("enqueue_after", after_params(rows, now), AfterRow, conn)
        except errors.InvalidParameterValue as exc:
            raise after_error(exc) from None

    def parent_results(self, job_id: int, *, conn: AnyConnection | None = None) -> list[ParentResult]:
        """The parents of job `job_id`, by id, with the result each stored (None unless it
        succeeded). Producer and worker rights: results are contents."""
        return self._many("parent_results", {"id": check_id(job_id, "job_id")}, ParentResult, conn)

    def job_family(self, job_id: int, *, limit: int = 20, conn: AnyConnection | None = None) -> list[Relative]:
        """The first `limit` parents and the first `limit` children of a job (reader rights)."""
        check_int(limit, "limit", 1, 10_000, "list at most 10000 of each")
        return self._many("job_family", {"id": check_id(job_id, "job_id"), "limit": limit}, Relative, conn)

    def waiting(self, *, cap: int | None = None, conn: AnyConnection | None = None) -> dict[str, int]:
        """Jobs waiting for parents, by type (each count capped at `cap`): never part of the
        backlog that scaling reads, since no worker can take them."""
        rows = self._many("waiting_counts", {"cap": cap}, WaitingCount, conn)
        return {r.job_type: r.waiting for r in rows}


def after_error(exc: errors.InvalidParameterValue) -> InvalidArgument:
    """The database's refusal of a job's parents, as the caller's error naming `after`."""
    problem = (exc.diag.message_primary or "was refused").removeprefix("pgwork: ").removeprefix("after: ")
    # The server quotes the caller's key as given: a bidi override in it must not reach a terminal.
    hint = exc.diag.message_hint or "name parents that exist and may still succeed"
    return InvalidArgument("after", inert(problem), inert(hint))
