"""A pgwork.App for the worker tests: `pgwork worker --app pgwork_test_appobj:app`."""

from __future__ import annotations

import asyncio
from typing import Any

import pgwork

app = pgwork.App(name="pgwork_test_appobj")
other = pgwork.App(name="other")
not_an_app = {"handlers": []}


@app.handler("app-echo", max_attempts=2)
def echo(job: pgwork.Job) -> dict[str, Any]:
    return {"echo": job.payload, "attempt": job.attempt}


@app.handler("app-broken", max_attempts=1)
def broken(job: pgwork.Job) -> None:
    raise RuntimeError(f"broken on purpose: {job.payload.get('why', '')}")


@app.handler("app-slow-retry", backoff=pgwork.Backoff(base=900, cap=900, jitter=0))
def slow_retry(job: pgwork.Job) -> None:
    raise RuntimeError("retry me much later")


@app.handler("app-async-echo", max_attempts=2)
async def async_echo(job: pgwork.Job) -> dict[str, Any]:
    await asyncio.sleep(0)
    return {"echo": job.payload, "attempt": job.attempt, "async": True}


@other.handler("app-echo")
def other_echo(job: pgwork.Job) -> str:
    return "the other app"
