"""The gpu and cpu-bound experiments' handlers (`pgwork worker --app pgwork.tools.lab.gpu_app`).
The model (pgwork.tools.lab.models, PGWORK_LAB_MODEL) loads once, when a worker, or each of its
child processes, imports this module."""

from __future__ import annotations

import inspect
import os
from typing import Any

import pgwork
from pgwork import Job
from pgwork.tools.lab import models

# Loaded where handlers run: not in a process-isolated worker's own process (the lab says which
# runs are: PGWORK_LAB_PROCESS), which imports this module only to learn its handlers.
IN_CHILD = bool(os.environ.get("PGWORK_CHILD"))
MODEL = models.load() if IN_CHILD or not os.environ.get("PGWORK_LAB_PROCESS") else models.SimModel(0, 0)
models.cpu_job(0, 50, 1)  # numpy imported and warm before the first job, as in the bare process
BATCH = int(os.environ.get("PGWORK_LAB_BATCH", "64"))
BATCH_WAIT = os.environ.get("PGWORK_LAB_BATCH_WAIT", "20ms")


@pgwork.handler("lab-infer")
def infer(job: Job) -> dict[str, Any]:
    return {"norm": MODEL.infer(1)}


@pgwork.handler("lab-cpu")
def cpu(job: Job) -> dict[str, Any]:
    p = job.payload
    return models.cpu_job(int(p.get("seed", 0)), int(p.get("n", 300)), int(p.get("rounds", 1)))


# Batch handlers arrive with issue 29 part 1; until this pgwork has them the lab says so.
if "batch" in inspect.signature(pgwork.handler).parameters:
    register: Any = pgwork.handler  # typed once this pgwork has them

    def infer_batch(jobs: list[Job]) -> list[dict[str, Any]]:
        norm = MODEL.infer(len(jobs))
        return [{"norm": norm, "batch": len(jobs)}] * len(jobs)

    register("lab-infer-batch", batch=BATCH, batch_wait=BATCH_WAIT)(infer_batch)
