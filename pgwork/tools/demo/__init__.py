"""`pgwork demo`: the queue end to end on sample invoices, in under a minute."""

# Here, not in app.py: importing app registers its handler, and only `--app pgwork.tools.demo.app`
# should do that (`pgwork demo` itself imports this package, and its process must handle nothing).
JOB_TYPE = "demo.extract_invoice"
# Each extracted invoice is then indexed for search by a batch handler (a model call per batch).
INDEX_JOB_TYPE = "demo.index_invoices"
INDEX_BATCH = 8
