"""Producing jobs through the Queue and the AsyncQueue alike: one face over both."""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg

from pgwork.db import Queue
from pgwork.db.aqueue import AsyncQueue


class Producer:
    """One face over both: `call(name, *args, **kwargs)` runs the method, awaiting it for async;
    `in_transaction(commit, fn)` runs fn(queue, conn) inside a caller-owned transaction."""

    def __init__(self, flavour: str, dsn: str) -> None:
        self.flavour = flavour
        self.dsn = dsn
        self.loop = asyncio.new_event_loop()
        self.sync: Queue | None = None
        self.aqueue: AsyncQueue | None = None
        if flavour == "sync":
            self.sync = Queue(dsn)
        else:
            self.aqueue = self.loop.run_until_complete(AsyncQueue.open(dsn))

    def call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        if self.sync is not None:
            return getattr(self.sync, name)(*args, **kwargs)
        return self.loop.run_until_complete(getattr(self.aqueue, name)(*args, **kwargs))

    def enqueue_in_transaction(self, commit: bool, job_type: str) -> int:
        if self.sync is not None:
            with psycopg.connect(self.dsn) as conn:
                job_id = self.sync.enqueue(job_type, {"t": 1}, conn=conn)
                conn.commit() if commit else conn.rollback()
            return job_id

        async def run() -> int:
            async with await psycopg.AsyncConnection.connect(self.dsn) as conn:
                assert self.aqueue is not None
                job_id = await self.aqueue.enqueue(job_type, {"t": 1}, conn=conn)
                await (conn.commit() if commit else conn.rollback())
            return job_id

        return self.loop.run_until_complete(run())

    def close(self) -> None:
        if self.sync is not None:
            self.sync.close()
        if self.aqueue is not None:
            self.loop.run_until_complete(self.aqueue.close())
        self.loop.close()
