"""Handlers the process-isolation tests run in the worker's child processes (spawned: each
child imports this module itself, so what a handler keeps in a global lives in its child)."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path
from typing import Any

import pgwork
from pgwork import Job, PermanentError

KEPT: list[bytes] = []  # memory a "leaky library" never frees


def _started(job: Job) -> None:
    if marker := job.payload.get("started_file"):
        Path(marker).write_text(str(os.getpid()))


@pgwork.handler("p-ok")
def ok(job: Job) -> dict[str, Any]:
    if mb := job.payload.get("keep_mb"):
        KEPT.append(b"x" * (int(mb) << 20))
    return {"pid": os.getpid(), "echo": job.payload.get("echo"), "child": os.environ.get("PGWORK_CHILD")}


@pgwork.handler("p-fail")
def fail(job: Job) -> None:
    if job.payload.get("permanent"):
        raise PermanentError("bad input: no such page")
    raise ValueError("boom in the child")


@pgwork.handler("p-die")
def die(job: Job) -> None:
    _started(job)
    time.sleep(float(job.payload.get("after", 0)))
    if code := job.payload.get("exit"):
        os._exit(int(code))
    os.kill(os.getpid(), signal.SIGKILL if job.payload.get("how") == "kill" else signal.SIGSEGV)


@pgwork.handler("p-hang")
def hang(job: Job) -> None:
    _started(job)
    while True:  # ignores job.should_stop, as a call stuck in native code would
        time.sleep(0.05)


@pgwork.handler("p-steps")
def steps(job: Job) -> Any:
    job.progress(0.5, "half way")
    saved = job.checkpoint({"page": 3})
    return {"saved": saved, "checkpoint": job.last_checkpoint, "stopped": job.should_stop}


@pgwork.handler("p-async")
async def in_loop(job: Job) -> dict[str, Any]:
    await asyncio.sleep(0)
    return {"pid": os.getpid()}


@pgwork.handler("p-thread", isolation="thread")
def on_thread(job: Job) -> dict[str, Any]:
    return {"pid": os.getpid()}


@pgwork.handler("p-batch")  # called with a list by the pool's run_batch (a batch handler's call)
def batch(jobs: list[Job]) -> list[Any]:
    for job in jobs:
        job.progress(1.0, "embedded")
    out = [ValueError(f"bad text {j.id}") if j.payload.get("bad") else {"pid": os.getpid(), "id": j.id} for j in jobs]
    return out[1:] if any(j.payload.get("short") for j in jobs) else out
