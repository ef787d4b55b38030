"""`pgwork demo`: the queue end to end on sample invoices, in under a minute."""
