"""The crash timeline's handler: `pgwork worker --app pgwork.tools.lab.crash_app`."""

from __future__ import annotations

from typing import Any

import pgwork
from pgwork import Job
from pgwork.tools.lab import CRASH_JOB_TYPE as JOB_TYPE


@pgwork.handler(JOB_TYPE)
def long_job(job: Job) -> dict[str, Any]:
    seconds = float(job.payload.get("seconds", 1.0))
    if not job.sleep(seconds):
        # Lost or released: the worker discards whatever is returned now.
        return {}
    return {"slept": seconds, "attempt": job.attempt, "n": job.payload.get("n")}
