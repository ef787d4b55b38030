"""The demo's handlers: `pgwork worker --app pgwork.tools.demo.app`.

`demo.extract_invoice` reads the fields out of an invoice's text. It first spends
`work_seconds` "scanning" its `pages` (standing in for OCR or a model call), reporting progress
and checkpointing after each page, so an attempt after a crash resumes at the next page; then it
parses. A document marked
`flaky_failures: N` fails its first N attempts as an unreliable backend would; a document that
does not parse is a PermanentError (dead at once: no retry can fix a torn scan). Each attempt
has 30 seconds (the handler's timeout); a job enqueued with its own timeout gets that instead,
and one that overruns it is told to stop (its `job.sleep` returns False) and fails as timed out.

`demo.index_invoices` is a batch handler: it gets up to INDEX_BATCH invoices in one call, as a
model on a GPU would (one forward pass costs a fixed part plus a little per document), and
returns one result per invoice, in order; a document with no text fails alone.

The document pipeline (pgwork.tools.demo.pipeline): `demo.split_bundle` returns pgwork.Then with
a `demo.extract_page` job per page and a `demo.merge_bundle` job that waits for all of them
(`after` their keys), created with the split's own finish; the merge reads the pages' results.
`demo.cleanup` runs every minute (@pgwork.periodic, as @app.periodic for an App), each tick once
however many workers run.
"""

from __future__ import annotations

import time
from decimal import Decimal
from typing import Any

import pgwork
from pgwork import Job, NewJob, PermanentError, Then
from pgwork.tools.demo import (
    CLEANUP_JOB_TYPE,
    INDEX_BATCH,
    INDEX_JOB_TYPE,
    JOB_TYPE,
    MERGE_JOB_TYPE,
    PAGE_JOB_TYPE,
    SPLIT_JOB_TYPE,
    invoices,
)
from pgwork.tools.demo.pipeline import merge_key, page_key


@pgwork.handler(JOB_TYPE, timeout="30s")
def extract_invoice(job: Job) -> dict[str, Any]:
    pages = int(job.payload.get("pages", 1))
    resumed = int((job.last_checkpoint or {}).get("page", 0))
    for page in range(resumed + 1, pages + 1):
        if not job.sleep(float(job.payload.get("work_seconds", 0.5)) / pages):
            # Lost, cancelled or released: whatever we return now is discarded anyway.
            return {}
        job.progress(page / pages, f"scanned page {page} of {pages}")
        if pages > 1 and not job.checkpoint({"page": page}):
            return {}
    if job.attempt <= int(job.payload.get("flaky_failures", 0)):
        raise ConnectionError(f"OCR backend timed out (simulated; attempt {job.attempt})")
    text = job.payload.get("text")
    if not isinstance(text, str):
        raise PermanentError("payload has no 'text' string to read")
    try:
        fields = invoices.parse(text)
    except invoices.InvoiceParseError as exc:
        raise PermanentError(f"unreadable invoice {job.payload.get('document')!r}: {exc}") from None
    fields["document"] = job.payload.get("document")
    if resumed:
        fields["resumed_after_page"] = resumed
    return fields


@pgwork.handler(INDEX_JOB_TYPE, batch=INDEX_BATCH, batch_wait="100ms")
def index_invoices(jobs: list[Job]) -> list[Any]:
    texts = [job.payload.get("text") for job in jobs]
    time.sleep(0.2 + 0.01 * len(jobs))  # "the model": a fixed cost per call, a little per document
    return [
        {"document": job.payload.get("document"), "terms": len(text.split()), "batch": len(jobs)}
        if isinstance(text, str)
        else PermanentError("payload has no 'text' string to index")
        for job, text in zip(jobs, texts, strict=True)
    ]


@pgwork.handler(SPLIT_JOB_TYPE)
def split_bundle(job: Job) -> Then:
    run, bundle, texts = job.payload["run"], job.payload["bundle"], job.payload["pages"]
    pages = [
        NewJob(PAGE_JOB_TYPE, {"run": run, "bundle": bundle, "page": n, "text": text, "role": "page"},
               key=page_key(run, bundle, n), max_attempts=1)
        for n, text in enumerate(texts)
    ]  # fmt: skip
    merge = NewJob(
        MERGE_JOB_TYPE,
        {"run": run, "bundle": bundle, "role": "merge"},
        key=merge_key(run, bundle),
        after=[page_key(run, bundle, n) for n in range(len(texts))],
    )
    return Then({"bundle": bundle, "pages": len(texts)}, jobs=[*pages, merge])


@pgwork.handler(PAGE_JOB_TYPE)
def extract_page(job: Job) -> dict[str, Any]:
    try:
        fields = invoices.parse(job.payload["text"])
    except invoices.InvoiceParseError as exc:
        raise PermanentError(f"unreadable page {job.payload['page']} of {job.payload['bundle']}: {exc}") from None
    return {"page": job.payload["page"], **fields}


@pgwork.handler(MERGE_JOB_TYPE)
def merge_bundle(job: Job) -> dict[str, Any]:
    pages = sorted(job.parent_results().values(), key=lambda r: r["page"])
    total = sum((Decimal(str(p["total"])) for p in pages), Decimal(0))
    return {"bundle": job.payload["bundle"], "pages": [p["page"] for p in pages], "total": str(total)}


@pgwork.periodic("* * * * *", job_type=CLEANUP_JOB_TYPE, name="demo.cleanup")
def cleanup(job: Job) -> dict[str, Any]:
    # Stands in for removing the split's scratch files: a periodic job, each tick enqueued once.
    return {"removed": 0}
