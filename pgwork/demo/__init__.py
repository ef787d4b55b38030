"""`pgwork demo`: the queue end to end on sample invoices, in under a minute."""

# Here, not in app.py: importing app registers its handler, and only `--app pgwork.demo.app`
# should do that (the CLI imports the demo command in every process, workers included).
JOB_TYPE = "demo.extract_invoice"
