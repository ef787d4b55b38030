"""`pgwork demo`: the queue end to end on sample invoices, in under a minute."""

# Here, not in app.py: importing app registers its handler, and only `--app pgwork.tools.demo.app`
# should do that (`pgwork demo` itself imports this package, and its process must handle nothing).
JOB_TYPE = "demo.extract_invoice"
# Each extracted invoice is then indexed for search by a batch handler (a model call per batch).
INDEX_JOB_TYPE = "demo.index_invoices"
INDEX_BATCH = 8
# The document pipeline (pgwork.tools.demo.pipeline): a bundle is split into pages, each page is
# extracted, and a merge waits for all of them; a clean-up job runs on a schedule.
SPLIT_JOB_TYPE = "demo.split_bundle"
PAGE_JOB_TYPE = "demo.extract_page"
MERGE_JOB_TYPE = "demo.merge_bundle"
CLEANUP_JOB_TYPE = "demo.cleanup"
PIPELINE_JOB_TYPES = (SPLIT_JOB_TYPE, PAGE_JOB_TYPE, MERGE_JOB_TYPE, CLEANUP_JOB_TYPE)
