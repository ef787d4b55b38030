"""The wake-up experiment's handler: `pgwork worker --app pgwork.tools.lab.noop_app` (no work at all)."""

from __future__ import annotations

from typing import Any

import pgwork
from pgwork import Job
from pgwork.tools.lab import NOOP_JOB_TYPE


@pgwork.handler(NOOP_JOB_TYPE)
def noop(job: Job) -> dict[str, Any]:
    return {"n": job.payload.get("n")}
