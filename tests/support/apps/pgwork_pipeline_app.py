"""A document pipeline for tests: split -> one job per page (fan-out) -> merge (fan-in); with
"anyway" in the split's payload the merge runs even when pages die (on_parent_failure="run").

`register(registry)` puts the handlers in a Registry of a test's own; importing the module also
registers them for a `pgwork worker --app pgwork_pipeline_app` process. With
PIPELINE_KILL_BEFORE_FINISH=1 such a process kills itself with SIGKILL when it is about to write a
finish that creates follow-ups: a worker killed between its handler's return and its finish."""

from __future__ import annotations

import os
import signal
from collections.abc import Sequence
from typing import Any

import pgwork
from pgwork import Job, NewJob, PermanentError, Then
from pgwork.db.batches import Batches, StoredSuccess
from pgwork.worker.registry import REGISTRY, Registry


def split(job: Job) -> Then:
    doc, n = job.payload["doc"], int(job.payload["pages"])
    dead = job.payload.get("dead_pages", [])
    seconds = job.payload.get("page_seconds", 0)
    pages = [
        NewJob("doc-page", {"doc": doc, "page": i, "dead": i in dead, "seconds": seconds}, key=f"{doc}:page:{i}")
        for i in range(n)
    ]
    # "anyway": the merge runs even if pages die (on_parent_failure="run"), naming what it lacks.
    anyway = bool(job.payload.get("anyway"))
    merge = NewJob(
        "doc-merge",
        {"doc": doc, "pages": n, "anyway": anyway},
        key=f"{doc}:merge",
        after=[p.key for p in pages if p.key],
        on_parent_failure="run" if anyway else "cancel",
    )
    return Then({"doc": doc, "pages": n}, jobs=[*pages, merge])


def page(job: Job) -> dict[str, Any]:
    if job.payload.get("dead"):
        raise PermanentError(f"page {job.payload['page']} is unreadable")
    job.sleep(float(job.payload.get("seconds", 0)))  # a worker killed now leaves the page to the reaper
    return {"doc": job.payload["doc"], "page": job.payload["page"], "text": f"text {job.payload['page']}"}


def merge(job: Job) -> dict[str, Any]:
    parents = job.parent_results()
    pages = sorted(r["page"] for r in parents.values())
    merged = {"doc": job.payload["doc"], "pages": pages, "parents": len(parents)}
    if job.payload.get("anyway"):
        merged["failed"] = sorted(job.failed_parents().values())
    return merged


def register(registry: Registry) -> Registry:
    registry.register("doc-split", split)
    registry.register("doc-page", page)
    registry.register("doc-merge", merge)
    return registry


if not REGISTRY.get("doc-split"):
    pgwork.handler("doc-split")(split)
    pgwork.handler("doc-page")(page)
    pgwork.handler("doc-merge")(merge)


def _killing(original: Any) -> Any:
    def finish(self: Batches, successes: Sequence[StoredSuccess], *args: Any, **kw: Any) -> Any:
        if any(s.followups for s in successes):
            os.kill(os.getpid(), signal.SIGKILL)
        return original(self, successes, *args, **kw)

    return finish


if os.environ.get("PIPELINE_KILL_BEFORE_FINISH"):
    Batches.finish_many = _killing(Batches.finish_many)  # type: ignore[method-assign]
    Batches.finish_then_claim = _killing(Batches.finish_then_claim)  # type: ignore[method-assign]
