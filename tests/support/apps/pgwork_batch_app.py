"""A batch handler for tests that run it in a real `pgwork worker` process (kept apart from
pgwork_test_app: a batch handler changes how much a worker on its module claims)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pgwork
from pgwork import Job


@pgwork.handler("batch-sleep", batch=8, batch_wait="200ms")
def batch_sleep(jobs: list[Job]) -> list[Any]:
    for job in jobs:
        if marker := job.payload.get("started_file"):
            Path(marker).write_text(str(len(jobs)))
    jobs[0].sleep(float(jobs[0].payload.get("seconds", 0)))
    return [{"n": job.payload.get("n"), "pid": os.getpid(), "batch": len(jobs)} for job in jobs]
