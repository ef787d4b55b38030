"""The Queue's plumbing (its pool, statements by name and shape) and its read-only questions;
pgwork.db.queue adds the writes. Split only to keep each module small: use `Queue`."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import Any, Self, TypeVar

from pgwork import durations
from pgwork.backoff import Backoff
from pgwork.db import statements
from pgwork.db.connect import PREPARE_THRESHOLD, AnyConnection, check_encoding, connect
from pgwork.db.horizon import read_horizon
from pgwork.db.listen import Listener
from pgwork.db.pool import POOL_TIMEOUT, Pool
from pgwork.db.rows import (
    ConnectionLimits,
    DeadRow,
    JobContents,
    JobDetail,
    JobRow,
    OwnerCount,
    ResultRow,
    RetryingRow,
    RunningRow,
    TakenRow,
)
from pgwork.db.schema import check_schema
from pgwork.db.wait import wait_for_job
from pgwork.dsn import resolve_pooling
from pgwork.durations import MAX_SECONDS
from pgwork.horizon import Horizon
from pgwork.models import TypeStats
from pgwork.validation import DEFAULT_MAX_PAYLOAD_BYTES, check_id, check_int, check_job_types, check_text

T = TypeVar("T")


class QueueBase:
    """The pool and the questions (no writes). Questions take an optional `now`."""

    def __init__(
        self,
        dsn: str,
        *,
        pool_size: int = 4,
        backoff: Backoff | None = None,
        backoffs: Mapping[str, Backoff] | None = None,
        max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
        application_name: str = "pgwork",
        check: bool = True,
        prepare: bool = True,
        pool_timeout: float = POOL_TIMEOUT,
        pooler: str | None = None,
        listen_dsn: str | None = None,
    ) -> None:
        self.dsn = dsn
        # `pooler="transaction"` (default: PGWORK_POOLER) behind a transaction-mode pooler;
        # `listen_dsn` (default: PGWORK_LISTEN_DSN) a direct connection for LISTEN only.
        self.pooling = resolve_pooling(pooler, listen_dsn)
        self.pool_timeout = check_seconds(pool_timeout, "pool_timeout")
        self.backoff = backoff or Backoff()
        # Per job type, overriding `backoff` (handlers registered with their own).
        self.backoffs: dict[str, Backoff] = dict(backoffs or {})
        self.max_payload_bytes = max_payload_bytes
        self.application_name = application_name
        with connect(dsn, application_name=application_name, prepare=False) as conn:
            check_encoding(conn)
            if check:
                check_schema(conn)
        self._pool = Pool(
            dsn,
            size=pool_size,
            application_name=application_name,
            # Through a transaction-mode pooler server-side prepared statements may land on
            # another backend; the pooler setting (or `prepare=False`) turns them off.
            prepare_threshold=PREPARE_THRESHOLD if prepare and self.pooling.prepares else None,
            timeout=self.pool_timeout,
        )

    # -- plumbing -------------------------------------------------------------------------

    def backoff_for(self, job_type: str | None) -> Backoff:
        """The backoff for a job type's retries: its handler's own, else the Queue's."""
        return self.backoffs.get(job_type or "", self.backoff)

    def on_limit_skipped(self, callback: Callable[[str], None] | None) -> None:
        """Call `callback(job_type)` each time a claim skips a limited type because another
        session holds its limit row (migration 0018): the claim took the other types instead of
        waiting. The worker counts these in pgwork_claim_limit_skipped_total."""
        self._pool.on_limit_skipped = callback

    def close(self, timeout: float = 5.0) -> None:
        """Close the pool, waiting at most `timeout` seconds for its background threads."""
        self._pool.close(timeout)

    def give_up_at(self, deadline: float | None) -> None:
        """From now on no call waits for a pool connection past the monotonic `deadline`
        (None: back to `pool_timeout` per call). A stopping worker sets it so that, with the
        database down, its writes fail by its shutdown deadline instead of after pool_timeout.
        Waits already in progress notice within a fraction of a second."""
        self._pool.give_up_at(deadline)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _many(
        self,
        name: str,
        params: dict[str, Any],
        row: type[T],
        conn: AnyConnection | None = None,
        *,
        binary: bool = False,
    ) -> list[T]:
        with self._pool.connection(conn) as c:
            return statements.many(c, name, params, row, binary=binary)

    def _one(self, name: str, params: dict[str, Any], row: type[T], conn: AnyConnection | None = None) -> T | None:
        with self._pool.connection(conn) as c:
            return statements.one(c, name, params, row)

    def _scalar(self, name: str, params: dict[str, Any], conn: AnyConnection | None = None) -> Any:
        with self._pool.connection(conn) as c:
            return statements.scalar(c, name, params)

    # -- questions ------------------------------------------------------------------------

    def stats(
        self, job_types: Iterable[str] | None = None, *, now: datetime | None = None, cap: int | None = None
    ) -> list[TypeStats]:
        """The backlog per job type; every type in `job_types` is answered (zeros when it has no
        live job). With `cap`, each count stops there (TypeStats.lower_bounds says which did): the
        cost follows the number of types, not of jobs. Without it the counts are exact and cost
        one index entry per live job."""
        if cap is not None:
            check_int(cap, "cap", 1, 2**31 - 1, "cap the counts at a positive whole number, or pass None for exact")
        return self._many("stats", {"job_types": check_job_types(job_types), "now": now, "cap": cap}, TypeStats)

    def running(self, *, now: datetime | None = None) -> list[RunningRow]:
        return self._many("running", {"now": now}, RunningRow)

    def retrying(self, *, now: datetime | None = None) -> list[RetryingRow]:
        return self._many("retrying", {"now": now}, RetryingRow)

    def dead(self, *, limit: int = 100) -> list[DeadRow]:
        check_int(limit, "limit", 1, 1_000_000, "show at most 1000000 dead jobs at once")
        return self._many("dead", {"limit": limit}, DeadRow)

    def running_by_owner(self, job_types: Iterable[str] | None = None) -> dict[str, int]:
        rows = self._many("running_by_owner", {"job_types": check_job_types(job_types)}, OwnerCount)
        return {r.owner: r.jobs for r in rows}

    def connection_limits(self) -> ConnectionLimits:
        """The server's max_connections and reserved slots (for pgwork.budget)."""
        row = self._one("connection_limits", {}, ConnectionLimits)
        assert row is not None  # one row, always
        return row

    def vacuum_horizon(self) -> Horizon:
        """Who holds back vacuum on this database and what the jobs table holds dead (pgwork.horizon)."""
        with self._pool.connection() as c:
            return read_horizon(c)

    def job(self, job_id: int) -> JobRow | None:
        return self._one("get_job", {"id": check_id(job_id)}, JobRow)

    def job_detail(self, job_id: int, *, now: datetime | None = None) -> JobDetail | None:
        """One job's life without its contents (`pgwork job show`): any reader may ask."""
        return self._one("job_detail", {"id": check_id(job_id), "now": now}, JobDetail)

    def recently_taken(
        self, job_types: Iterable[str], *, within: float = 600.0, now: datetime | None = None
    ) -> dict[str, datetime | None]:
        """For each type, when a worker last took one of its jobs within `within` seconds, as far
        as a bounded read tells (migration 16); None: no sign of one. Any reader may ask."""
        wanted = list(job_types)
        if not wanted:
            return {}
        params = {"job_types": check_job_types(wanted), "within": check_seconds(within, "within"), "now": now}
        return {r.job_type: r.taken_at for r in self._many("recently_taken", params, TakenRow)}

    def autovacuum_on(self) -> bool:
        """Whether autovacuum cleans pgwork.jobs (the server's setting and the table's own)."""
        return bool(self._scalar("autovacuum_on", {}))

    def job_contents(self, job_id: int) -> JobContents | None:
        """A job's payload, checkpoint and result: producers and workers only (the reader
        profile sees no payload; JobDetail.may_read_contents says whether this role may)."""
        return self._one("job_contents", {"id": check_id(job_id)}, JobContents)

    def result(self, key: str) -> ResultRow | None:
        params = {"key": check_text(key, "key", "pass the job's idempotency key")}
        return self._one("get_result", params, ResultRow)

    def wait(self, job_id: int, *, timeout: float = 60.0, poll: float = 1.0, result: bool = True) -> Any:
        """The job's result once it succeeds (None with `result=False`, which needs only the
        reader profile); raises pgwork.JobFailed (dead or cancelled, with its last error) or
        pgwork.WaitTimeout. LISTENs on a connection of its own (never the
        pool's) and re-reads every `poll` seconds as the fallback (pgwork.db.wait). Behind a
        transaction-mode pooler it waits on the direct `listen_dsn`, or polls only without one."""
        name = f"{self.application_name}-wait"[:63]
        target = self.pooling.listen_target(self.dsn)
        return wait_for_job(
            target or self.dsn,
            job_id,
            timeout=timeout,
            poll=poll,
            result=result,
            application_name=name,
            listen=target is not None,
        )

    # -- wake-ups -------------------------------------------------------------------------

    @property
    def prepares(self) -> bool:
        """Whether this Queue's connections use server-side prepared statements now (off behind
        a transaction-mode pooler, and for good once one was met without the setting)."""
        return self._pool.prepare_threshold is not None

    @property
    def pooler_symptom(self) -> str | None:
        """PoolerNeeded's message once a transaction-mode pooler was met without the setting."""
        return self._pool.pooler_symptom

    @property
    def can_listen(self) -> bool:
        """False behind a transaction-mode pooler without a direct `listen_dsn`: poll only."""
        return self.pooling.listen_target(self.dsn) is not None

    def listener(self) -> Listener:
        """A dedicated session connection that LISTENs for new jobs (never from the pool:
        behind a transaction-mode pooler LISTEN would silently stop working), on `listen_dsn`
        when the Queue is behind one."""
        return Listener(self.pooling.listen_target(self.dsn) or self.dsn, self.application_name)


def check_seconds(value: float, field: str, high: float = MAX_SECONDS) -> float:
    """Seconds passed to the API: 0..high (a century unless the argument says less), checked before
    any arithmetic (pgwork.durations.check_seconds)."""
    return durations.check_seconds(value, field, high=high)
