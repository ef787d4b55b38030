"""Handlers the worker tests run in real `pgwork worker` subprocesses (and in-process)."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pgwork
from pgwork import Job, PermanentError


@pgwork.handler("sleep")
def sleep(job: Job) -> dict[str, Any]:
    seconds = float(job.payload.get("seconds", 0))
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
