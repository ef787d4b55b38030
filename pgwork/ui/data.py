"""What the console reads and does, through pgwork's functions (the I/O edge of pgwork.ui).

Reads: the operator's bounded backlog (`Queue.stats(cap=)`), running and dead jobs (the
`running_jobs`/`dead` functions), and the console's own functions of migration 17 (find_jobs,
job_window, finished_buckets, console_actions_recent). Actions: `Queue.retry` and
`Queue.cancel`, the same fenced functions as `pgwork retry`/`cancel`, each recorded by
`record_console_action` in the same transaction and logged.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from psycopg.rows import class_row, tuple_row

from pgwork.db import Queue
from pgwork.db.connect import AnyConnection
from pgwork.db.pool import Pool
from pgwork.db.rows import DeadRow, JobContents, JobDetail, RunningRow
from pgwork.limits import TypeLimit
from pgwork.models import TypeStats
from pgwork.sql_files import Statements
from pgwork.ui.filters import BULK_CAP, BULK_SCAN, PAGE, SCAN, JobFilter
from pgwork.ui.fleet import WorkerRow, workers_from
from pgwork.ui.rows import ActionRow, Bucket, FoundJob, May

log = logging.getLogger("pgwork.ui")
T = TypeVar("T")
SQL = Statements("pgwork.ui", "sql/console.sql")
# Overview counts stop here, as the operator's poll's do: the cost follows types x cap, never the
# table (10,000 cost ~55 ms over 8 types at 5M jobs on the lab machine; 1,000 a tenth of it).
COUNT_CAP = 1_000
CHART_CAP = 5_000  # a chart bucket's counts stop here: 12 buckets x 2 ranges of at most this
LIST_ERROR_CHARS = 300  # an error as the list shows it: a 1 MiB error costs a page nothing
DETAIL_ERROR_CHARS = 65_536  # an error as the detail shows it
RETRY_STATES = ("dead", "cancelled")  # what pgwork.retry moves
CANCEL_STATES = ("pending", "running")  # what pgwork.cancel moves


@dataclass(frozen=True)
class Page:
    jobs: list[FoundJob]
    next_before: int | None  # the cursor for the next page (None: no older job)
    window_exhausted: bool  # fewer than a page matched among the SCAN jobs looked at


@dataclass(frozen=True)
class JobPage:
    detail: JobDetail
    contents: JobContents | None  # None: this role may not read payloads and results
    error: str  # the newest error, cut to DETAIL_ERROR_CHARS
    error_length: int


@dataclass(frozen=True)
class ActionResult:
    action: str
    asked: int
    changed: list[int]
    requested: list[int]  # cancel only: running jobs asked to stop at their next heartbeat
    untouched: int

    def summary(self) -> str:
        verb = "requeued" if self.action == "retry" else "cancelled"
        text = f"{verb} {len(self.changed)} of {self.asked}"
        if self.requested:
            text += f"; {len(self.requested)} running asked to stop at their next heartbeat"
        if self.untouched:
            text += f"; {self.untouched} left alone (not in a state {self.action} moves, or gone)"
        return text


def is_stuck(row: RunningRow, stuck_after: float) -> bool:
    """A running job no one is renewing: its lease lapsed (the reaper has not come yet) or its
    heartbeat is older than `stuck_after` seconds (pure)."""
    return row.lease_remaining_seconds < 0 or row.since_heartbeat_seconds > stuck_after


def action_states(action: str, state: str | None) -> list[str]:
    """The states a bulk `action` may move, narrowed by the filter's state (pure; [] = none)."""
    movable = RETRY_STATES if action == "retry" else CANCEL_STATES
    if state is None:
        return list(movable)
    return [state] if state in movable else []


class Console:
    def __init__(self, dsn: str, *, pool_size: int = 4, prepare: bool = True) -> None:
        self.queue = Queue(dsn, pool_size=2, prepare=prepare, application_name="pgwork-ui")
        self._pool = Pool(
            dsn, size=pool_size, application_name="pgwork-ui", prepare_threshold=5 if prepare else None, timeout=10.0
        )

    def close(self) -> None:
        self._pool.close(5.0)
        self.queue.close()

    @contextmanager
    def _conn(self) -> Iterator[AnyConnection]:
        with self._pool.connection() as conn:
            yield conn

    def _many(self, conn: AnyConnection, name: str, params: dict[str, Any], row: type[T]) -> list[T]:
        with conn.cursor(row_factory=class_row(row)) as cur:
            cur.execute(SQL.query(name), params)
            return cur.fetchall()

    def _scalar(self, conn: AnyConnection, name: str, params: dict[str, Any]) -> Any:
        with conn.cursor(row_factory=tuple_row) as cur:
            cur.execute(SQL.query(name), params)
            found = cur.fetchone()
            return found[0] if found else None

    # -- reads ----------------------------------------------------------------------------

    def may(self) -> May:
        with self._conn() as conn:
            return self._many(conn, "may", {}, May)[0]

    def overview(self) -> list[TypeStats]:
        return self.queue.stats(cap=COUNT_CAP)

    def buckets(
        self, *, buckets: int = 12, bucket_seconds: float = 3600.0, now: datetime | None = None
    ) -> list[Bucket]:
        params = {"buckets": buckets, "bucket_seconds": bucket_seconds, "cap": CHART_CAP, "now": now}
        with self._conn() as conn:
            return self._many(conn, "finished_buckets", params, Bucket)

    def _find(
        self,
        conn: AnyConnection,
        f: JobFilter,
        may: May,
        *,
        statuses: list[str] | None,
        scan: int = SCAN,
        lim: int = PAGE,
        error_chars: int | None = LIST_ERROR_CHARS,
    ) -> list[FoundJob]:
        params: dict[str, Any] = {
            "job_types": [f.job_type] if f.job_type else None,
            "statuses": statuses,
            "error": f.error,
            "created_from": f.created_from,
            "created_to": f.created_to,
            "before": f.before,
            "scan": scan,
            "lim": lim,
            "error_chars": error_chars,
            "now": None,
        }
        if may.read_contents:
            params |= {"path": list(f.payload_path) if f.payload_path else None, "value": f.payload_value}
            return self._many(conn, "find_jobs_contents", params, FoundJob)
        # A reader never filters by payload: the filter itself would reveal payloads.
        return self._many(conn, "find_jobs", params, FoundJob)

    def find(self, f: JobFilter, may: May) -> Page:
        """One page of the filter: the matches among the SCAN newest jobs below its cursor."""
        with self._conn() as conn:
            jobs = self._find(conn, f, may, statuses=[f.state] if f.state else None)
            if len(jobs) >= PAGE:
                return Page(jobs, jobs[-1].id, window_exhausted=False)
            return Page(jobs, self._scalar(conn, "job_window", {"before": f.before, "scan": SCAN}), True)

    def job(self, job_id: int) -> JobPage | None:
        """One job whole, read as `pgwork job show` reads it (job_detail for any reader,
        job_contents for roles that may read payloads and results)."""
        detail = self.queue.job_detail(job_id)
        if detail is None:
            return None
        contents = self.queue.job_contents(job_id) if detail.may_read_contents else None
        error = detail.last_error or ""
        return JobPage(detail, contents, error[:DETAIL_ERROR_CHARS], len(error))

    def running(self, stuck_after: float) -> list[tuple[RunningRow, bool]]:
        """Running jobs, the stalest heartbeat first, each with whether it looks stuck."""
        rows = sorted(self.queue.running(), key=lambda r: r.since_heartbeat_seconds, reverse=True)
        return [(r, is_stuck(r, stuck_after)) for r in rows]

    def workers(self, stuck_after: float, limit: int = 200) -> tuple[list[WorkerRow], bool]:
        """The workers holding running jobs (read from the fleet's running jobs, as the Running
        page reads them; the worker lease rows themselves hold secrets and are the owner's only)."""
        return workers_from(self.running(stuck_after), limit)

    def limits(self) -> list[TypeLimit]:
        """Every per-type limit with its running jobs and tokens, as `pgwork limits show` reads them
        (pgwork.limits: one row per limited type, each count a range of jobs_running_idx)."""
        return self.queue.limits()

    def may_read(self, function: str) -> bool:
        """Whether the connecting role may call `function` (its signature), as the database decides."""
        with self._conn() as conn:
            return bool(self._scalar(conn, "may_call", {"function": function}))

    def dead(self, limit: int = 50) -> list[DeadRow]:
        """The newest dead jobs (pgwork.dead_letters: a walk of jobs_dead_idx, errors cut short)."""
        with self._conn() as conn:
            return self._many(conn, "dead_letters", {"lim": limit, "error_chars": LIST_ERROR_CHARS}, DeadRow)

    def matching_ids(self, f: JobFilter, may: May, action: str) -> list[int]:
        """The jobs a bulk `action` on the filter would move: among the BULK_SCAN newest jobs below
        the filter's cursor (the page shown), at most BULK_CAP, in a state the action moves."""
        states = action_states(action, f.state)
        if not states:
            return []
        with self._conn() as conn:
            found = self._find(conn, f, may, statuses=states, scan=BULK_SCAN, lim=BULK_CAP, error_chars=0)
        return [j.id for j in found]

    def actions(self, limit: int = 50) -> list[ActionRow]:
        with self._conn() as conn:
            return self._many(conn, "recent_actions", {"lim": limit}, ActionRow)

    # -- actions --------------------------------------------------------------------------

    def act(self, action: str, ids: list[int], *, actor: str, target: str) -> ActionResult:
        """Retry or cancel `ids` through pgwork.retry/pgwork.cancel; the record commits with them."""
        if action not in ("retry", "cancel"):
            raise ValueError(f"unknown action {action!r}")
        with self._conn() as conn:
            if not ids:
                result = ActionResult(action, 0, [], [], 0)
            elif action == "retry":
                done = self.queue.retry(ids, conn=conn)
                result = ActionResult(action, len(ids), done, [], len(ids) - len(done))
            else:
                report = self.queue.cancel(ids, conn=conn)
                result = ActionResult(action, len(ids), report.cancelled, report.requested, len(report.not_cancellable))
            params = {
                "actor": actor,
                "action": action,
                "target": target,
                "jobs": len(result.changed),
                "outcome": result.summary(),
            }
            self._scalar(conn, "record_action", params)
        # After the commit: the log says what happened, never what was only attempted.
        log.info("console action: %s %s by %s: %s", action, target, actor, result.summary())
        return result
