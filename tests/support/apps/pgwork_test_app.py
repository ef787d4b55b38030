"""Handlers the worker tests run in real `pgwork worker` subprocesses (and in-process).

Most plain handlers have an `async def` twin named "async-" + its type, so a test can run the
same story for both kinds (see the `kind` fixture); every worker on this module serves both."""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
import time
from pathlib import Path
from typing import Any

import pgwork
from pgwork import Job, PermanentError


def _mark_started(job: Job) -> None:
    """A test that must know the handler runs (not only that its job was claimed) names a file."""
    if marker := job.payload.get("started_file"):
        Path(marker).write_text(str(job.attempt))


@pgwork.handler("sleep")
def sleep(job: Job) -> dict[str, Any]:
    _mark_started(job)
    seconds = float(job.payload.get("seconds", 0))
    if job.attempt == 1 and "first_attempt_seconds" in job.payload:
        # A first attempt that outlasts any setup a loaded machine can be slow at (a test killing it).
        seconds = float(job.payload["first_attempt_seconds"])
    if job.payload.get("busy"):
        # Ignores stop requests, like a handler stuck in a library call.
        time.sleep(seconds)
    else:
        job.sleep(seconds)
    return {"slept": seconds, "pid": os.getpid(), "attempt": job.attempt, "n": job.payload.get("n")}


@pgwork.handler("noop")
def noop(job: Job) -> dict[str, Any]:
    return {"n": job.payload.get("n")}


@pgwork.handler("fail")
def fail(job: Job) -> None:
    raise RuntimeError(f"model backend returned 503 (attempt {job.attempt})")


@pgwork.handler("quote")
def quote(job: Job) -> None:
    # A handler's error quoting what a producer sent (issue 24 class 6: the log must show it inert).
    raise PermanentError(f"cannot parse {job.payload.get('text')}")


@pgwork.handler("permanent")
def permanent(job: Job) -> None:
    raise PermanentError("invoice has no number; retrying cannot help")


@pgwork.handler("bad_result")
def bad_result(job: Job) -> Any:
    return {"when": object()}


@pgwork.handler("exit")
def exits(job: Job) -> None:
    raise SystemExit(3)


@pgwork.handler("flaky")
def flaky(job: Job) -> dict[str, int]:
    if job.attempt <= int(job.payload.get("fail_times", 2)):
        raise ConnectionError(f"flaky upstream, attempt {job.attempt}")
    return {"attempt": job.attempt}


@pgwork.handler("watch")
def watch(job: Job) -> dict[str, str]:
    """Runs until told to stop (or a deadline), then records why in a marker file."""
    deadline = time.monotonic() + float(job.payload.get("seconds", 30))
    while time.monotonic() < deadline and job.sleep(0.05):
        pass
    marker = job.payload.get("marker")
    reason = job.stop_reason.value if job.stop_reason else "finished"
    if marker:
        Path(marker).write_text(reason)
    return {"reason": reason}


@pgwork.handler("stuck", timeout="1s")
def stuck(job: Job) -> dict[str, Any]:
    """Overruns its 1s timeout ignoring every stop request, like a call into a hung library."""
    time.sleep(float(job.payload.get("seconds", 60)))
    return {"late": True}


# -- shared by both kinds ------------------------------------------------------------------

_barriers: dict[str, threading.Barrier] = {}
_events: dict[str, tuple[list[int], asyncio.Event]] = {}
_lock = threading.Lock()
# Jobs of the "count" types in their handler right now, and the most there ever were.
in_flight = {"now": 0, "peak": 0}


@pgwork.handler("gather")
def gather(job: Job) -> dict[str, Any]:
    """Returns only once `n` jobs of its group are inside the handler at the same time."""
    group, n = str(job.payload["group"]), int(job.payload["n"])
    with _lock:
        barrier = _barriers.setdefault(group, threading.Barrier(n))
    barrier.wait(timeout=60)  # broken (an error) unless all n arrive: they must run concurrently
    return {"group": group, "n": n}


@pgwork.handler("count")
def count(job: Job) -> dict[str, int]:
    _enter()
    try:
        job.sleep(float(job.payload.get("seconds", 0.05)))
    finally:
        _leave()
    return {"n": int(job.payload.get("n", 0))}


def _enter() -> None:
    with _lock:
        in_flight["now"] += 1
        in_flight["peak"] = max(in_flight["peak"], in_flight["now"])


def _leave() -> None:
    with _lock:
        in_flight["now"] -= 1


# -- the same handlers, async def: "async-" + the plain one's type -----------------------------


@pgwork.handler("async-sleep")
async def async_sleep(job: Job) -> dict[str, Any]:
    _mark_started(job)
    seconds = float(job.payload.get("seconds", 0))
    if job.attempt == 1 and "first_attempt_seconds" in job.payload:
        # A first attempt that outlasts any setup a loaded machine can be slow at (a test killing it).
        seconds = float(job.payload["first_attempt_seconds"])
    if job.payload.get("busy"):
        # Ignores stop requests: swallows every cancellation and goes on waiting.
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.sleep(left)
    else:
        await asyncio.sleep(seconds)
    return {"slept": seconds, "pid": os.getpid(), "attempt": job.attempt, "n": job.payload.get("n")}


@pgwork.handler("async-noop")
async def async_noop(job: Job) -> dict[str, Any]:
    await asyncio.sleep(0)
    return {"n": job.payload.get("n")}


@pgwork.handler("async-fail")
async def async_fail(job: Job) -> None:
    await asyncio.sleep(0)
    raise RuntimeError(f"model backend returned 503 (attempt {job.attempt})")


@pgwork.handler("async-permanent")
async def async_permanent(job: Job) -> None:
    raise PermanentError("invoice has no number; retrying cannot help")


@pgwork.handler("async-bad_result")
async def async_bad_result(job: Job) -> Any:
    return {"when": object()}


@pgwork.handler("async-exit")
async def async_exits(job: Job) -> None:
    raise SystemExit(3)


@pgwork.handler("async-flaky")
async def async_flaky(job: Job) -> dict[str, int]:
    if job.attempt <= int(job.payload.get("fail_times", 2)):
        raise ConnectionError(f"flaky upstream, attempt {job.attempt}")
    return {"attempt": job.attempt}


@pgwork.handler("async-watch")
async def async_watch(job: Job) -> dict[str, str]:
    """Runs until its task is cancelled (or a deadline), then records why in a marker file."""
    marker = job.payload.get("marker")
    try:
        await asyncio.sleep(float(job.payload.get("seconds", 30)))
    except asyncio.CancelledError:
        if marker:
            Path(marker).write_text(job.stop_reason.value if job.stop_reason else "cancelled by someone else")
        raise
    if marker:
        Path(marker).write_text("finished")
    return {"reason": "finished"}


@pgwork.handler("async-gather")
async def async_gather(job: Job) -> dict[str, Any]:
    """Returns only once `n` jobs of its group are awaiting here at the same time."""
    group, n = str(job.payload["group"]), int(job.payload["n"])
    arrived, everyone = _events.setdefault(group, ([], asyncio.Event()))
    arrived.append(job.id)
    if len(arrived) == n:
        everyone.set()
    await asyncio.wait_for(everyone.wait(), timeout=60)  # a TimeoutError unless all n are in flight
    return {"group": group, "n": n}


@pgwork.handler("async-count")
async def async_count(job: Job) -> dict[str, int]:
    _enter()
    try:
        await asyncio.sleep(float(job.payload.get("seconds", 0.05)))
    finally:
        _leave()
    return {"n": int(job.payload.get("n", 0))}


@pgwork.handler("async-block")
async def async_block(job: Job) -> dict[str, float]:
    """Blocks the event loop: what a handler that calls time.sleep in an async def does."""
    seconds = float(job.payload.get("seconds", 1.5))
    time.sleep(seconds)
    return {"blocked": seconds}


@pgwork.handler("pages")
def pages(job: Job) -> dict[str, Any]:
    """Works through `pages` pages, reporting progress and checkpointing after each; the first
    attempt stalls after checkpointing page `stall_at` (a worker killed there loses nothing)."""
    total = int(job.payload.get("pages", 5))
    start = int((job.last_checkpoint or {}).get("page", 0))
    for page in range(start + 1, total + 1):
        pgwork.current_job().progress(page / total, f"page {page} of {total}")
        if not job.checkpoint({"page": page}):
            return {}
        if job.attempt == 1 and page == job.payload.get("stall_at"):
            job.sleep(120)
            return {}
    return {"resumed_after_page": start, "attempt": job.attempt}


@pgwork.handler("bad_progress")
def bad_progress(job: Job) -> None:
    job.progress(40, "percent, not a fraction")
