"""The AsyncQueue: what an asyncio program (a web app) needs of pgwork, on psycopg's async API.

    async with await AsyncQueue.open(dsn) as q:          # its own AsyncConnectionPool
        job_id = await q.enqueue("ocr", {"doc": 7})
    q = AsyncQueue(pool=app_pool)                        # or the program's own pool
    async with app_pool.connection() as conn:            # or inside the program's transaction:
        await save_order(conn)
        await q.enqueue("ocr", {"doc": 7}, conn=conn)     # exists iff that transaction commits

Producing and asking only (enqueue, job, result, cancel, wait): the job's life (claim,
heartbeat, finish) stays with the worker. The same statements (pgwork/sql/queries.sql), the same
validation and keys as Queue (pgwork.db.params), run through the async runners of
pgwork.db.statements. The producing methods mirror Queue's line for line on purpose (as psycopg's own
sync and async classes do): one signature and docstring for both, read side by side, with the
logic below them shared in pgwork.db.params.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any, Self, TypeVar

from psycopg import AsyncConnection, errors
from psycopg_pool import AsyncConnectionPool

from pgwork import decoding
from pgwork.db import statements
from pgwork.db.connect import PREPARE_THRESHOLD, aconnect, check_encoding_value, connection_kwargs
from pgwork.db.params import after_params, any_after, cancel_ids, cancel_report, unique_params
from pgwork.db.pipelines import AfterRow, after_error
from pgwork.db.rows import CancelRow, EnqueuedRow, IdRow, JobRow, ResultRow
from pgwork.db.schema import check_version
from pgwork.db.wait import await_job
from pgwork.dsn import resolve_pooling, with_tcp_defaults
from pgwork.errors import InvalidArgument
from pgwork.models import CancelReport, NewJob
from pgwork.validation import DEFAULT_MAX_PAYLOAD_BYTES, check_id, check_text, validate

T = TypeVar("T")
AnyAsyncConnection = AsyncConnection[Any]


class AsyncQueue:
    """Producing and asking on an AsyncConnectionPool. Every call takes an optional `conn` (an
    AsyncConnection): the statement runs on it and the caller commits, or not."""

    def __init__(
        self,
        pool: AsyncConnectionPool[Any],
        *,
        dsn: str | None = None,
        max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
        application_name: str = "pgwork",
        owns_pool: bool = False,
        pooler: str | None = None,
        listen_dsn: str | None = None,
    ) -> None:
        """Over the caller's open pool. `dsn` is what `wait` connects with (default: the
        pool's conninfo); `open` builds a pool of its own and checks the schema first. The
        caller's pool keeps its own loaders unless it was made with `configure=configure`."""
        if not isinstance(pool, AsyncConnectionPool):
            raise InvalidArgument(
                "pool",
                f"must be a psycopg_pool.AsyncConnectionPool, got {type(pool).__name__}",
                "or use `await AsyncQueue.open(dsn)`",
            )
        self._pool = pool
        self.dsn = dsn if dsn is not None else pool.conninfo if isinstance(pool.conninfo, str) else ""
        self.max_payload_bytes = max_payload_bytes
        self.application_name = application_name
        self._owns_pool = owns_pool
        # As the Queue's: PGWORK_POOLER / PGWORK_LISTEN_DSN unless given.
        self.pooling = resolve_pooling(pooler, listen_dsn)

    @classmethod
    async def open(
        cls,
        dsn: str,
        *,
        pool_size: int = 4,
        max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
        application_name: str = "pgwork",
        check: bool = True,
        prepare: bool = True,
        pooler: str | None = None,
        listen_dsn: str | None = None,
    ) -> Self:
        """An AsyncQueue with a pool of its own, once the database is UTF8 and migrated."""
        pooling = resolve_pooling(pooler, listen_dsn)
        async with await aconnect(dsn, application_name=application_name, prepare=False) as conn:
            encoding = await statements.ascalar(conn, "server_encoding")
            check_encoding_value(encoding, conn.info.dbname)
            if check:
                present = await statements.ascalar(conn, "schema_exists")
                version = int(await statements.ascalar(conn, "schema_version") or 0) if present else 0
                check_version(version, conn.info.dbname)
        pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
            with_tcp_defaults(dsn),
            min_size=1,
            max_size=max(1, pool_size),
            kwargs=connection_kwargs(
                True, application_name, PREPARE_THRESHOLD if prepare and pooling.prepares else None
            ),
            open=False,
            configure=configure,
        )
        await pool.open(wait=True)
        return cls(
            pool,
            dsn=dsn,
            max_payload_bytes=max_payload_bytes,
            application_name=application_name,
            owns_pool=True,
            pooler=pooling.mode or "none",
            listen_dsn=pooling.listen_dsn or "",
        )

    async def close(self) -> None:
        """Close the pool if `open` made it (the caller's own pool is the caller's to close)."""
        if self._owns_pool:
            await self._pool.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _many(self, name: str, params: dict[str, Any], row: type[T], conn: AnyAsyncConnection | None) -> list[T]:
        if conn is not None:
            return await statements.amany(conn, name, params, row)
        async with self._pool.connection() as pooled:
            return await statements.amany(pooled, name, params, row)

    async def _one(self, name: str, params: dict[str, Any], row: type[T], conn: AnyAsyncConnection | None) -> T | None:
        if conn is not None:
            return await statements.aone(conn, name, params, row)
        async with self._pool.connection() as pooled:
            return await statements.aone(pooled, name, params, row)

    # -- producing ------------------------------------------------------------------------

    async def enqueue(
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
        conn: AnyAsyncConnection | None = None,
        now: datetime | None = None,
    ) -> int:
        """Add one job; returns its id. With `conn`, the job exists iff the caller commits.
        `timeout` (seconds, "10m", or a timedelta) overrides its handler's hard timeout. With
        `unique`, as Queue.enqueue: a taken key adds nothing and answers the existing job's id.
        With `after` and `on_parent_failure`, as Queue.enqueue."""
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
        return (await self.enqueue_many([job], conn=conn, now=now))[0]

    async def enqueue_many(
        self, jobs: Sequence[NewJob], *, conn: AnyAsyncConnection | None = None, now: datetime | None = None
    ) -> list[int]:
        """Add many jobs in one statement. All are validated first: one bad job writes none."""
        rows = [validate(job, self.max_payload_bytes) for job in jobs]
        if not rows:
            return []
        if any_after(rows):
            try:
                return [r.id for r in await self._many("enqueue_after", after_params(rows, now), AfterRow, conn)]
            except errors.InvalidParameterValue as exc:
                raise after_error(exc) from None
        params = unique_params(rows, now)
        if any(params["uniques"]):
            return [r.id for r in await self._many("enqueue_unique", params, EnqueuedRow, conn)]
        del params["uniques"]
        return [r.id for r in await self._many("enqueue", params, IdRow, conn)]

    async def cancel(
        self, ids: Sequence[int], *, now: datetime | None = None, conn: AnyAsyncConnection | None = None
    ) -> CancelReport:
        wanted = cancel_ids(ids)
        return cancel_report(wanted, await self._many("cancel", {"ids": wanted, "now": now}, CancelRow, conn))

    # -- asking ---------------------------------------------------------------------------

    async def job(self, job_id: int, *, conn: AnyAsyncConnection | None = None) -> JobRow | None:
        return await self._one("get_job", {"id": check_id(job_id)}, JobRow, conn)

    async def result(self, key: str, *, conn: AnyAsyncConnection | None = None) -> ResultRow | None:
        params = {"key": check_text(key, "key", "pass the job's idempotency key")}
        return await self._one("get_result", params, ResultRow, conn)

    async def wait(self, job_id: int, *, timeout: float = 60.0, poll: float = 1.0, result: bool = True) -> Any:
        """The job's result once it succeeds (None with `result=False`, which needs only the
        reader profile); raises pgwork.JobFailed (dead or cancelled, with its last error) or
        pgwork.WaitTimeout. LISTENs on a connection of its own (never the
        pool's) and re-reads every `poll` seconds as the fallback."""
        target = self.pooling.listen_target(self.dsn)
        return await await_job(
            target or self.dsn,
            job_id,
            timeout=timeout,
            poll=poll,
            result=result,
            application_name=f"{self.application_name}-wait"[:63],
            listen=target is not None,
        )


async def configure(conn: AnyAsyncConnection) -> None:
    """pgwork's loaders (a row Python cannot decode reads as a marker, never an exception), for
    the program's own pool: `AsyncConnectionPool(dsn, configure=pgwork.db.aqueue.configure)`."""
    decoding.configure(conn)
