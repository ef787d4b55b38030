"""Batch handlers the process-isolation tests run in the worker's child processes."""

from __future__ import annotations

import os
from typing import Any

import pgwork
from pgwork import Job, PermanentError


@pgwork.handler("pb-embed", batch=4, batch_wait="2s", isolation="process")
def embed(jobs: list[Job]) -> list[Any]:
    if any(j.payload.get("crash") for j in jobs):
        os._exit(3)  # a model library's crash mid-batch
    return [{"pid": os.getpid(), "n": len(jobs)} if j.payload.get("text") else PermanentError("no text") for j in jobs]
