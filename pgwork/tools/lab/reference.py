"""The reference write-up's published figures (docs/../shared/reference), quoted beside ours.

These are quotations, not measurements: every figure pgwork measured comes from the CSV.
"""

from __future__ import annotations

MACHINE = (
    "one laptop (the write-up says the 16 workers 'fit comfortably on 12 cores'), one PostgreSQL, "
    "no replication, network hop or pooler; work was time.sleep in worker processes"
)

CLAIMS = (
    "naive at 16 workers: 1,286 executions for 400 jobs (886 wasted), a third of the locking rate; "
    "8 workers / 200 jobs: one job handed to six workers inside 2.2 ms; attempt_count seen at 3 and 4 "
    "on a first execution",
    "SKIP LOCKED: exactly 400 claims for 400 jobs at every worker count, within 2% of linear to 16 workers",
    "claim p50 1.68 ms at 16 workers against 200 ms of work",
    "held transaction: about 4% faster at 16 workers; claim p50 0.86 ms against 1.32 ms at 1 worker",
)

HELD = (
    "8 workers: every worker idle in transaction for as long as its job runs",
    "longest open transaction 0.2 s with 200 ms jobs, 2.52 s with 3 s jobs",
)

HISTORY = (
    "500 pending on a 240 kB table: index scan on jobs_claim_idx, 7 shared buffer hits, 0.032 ms",
    "after 500,000 completed rows (91 MB): the same plan, 4 hits, 0.021 ms",
    "partial index dropped: seq scan + sort, 10,216 buffer hits, 27.648 ms",
    "the partial index is about 475 times smaller than a full one on the 500,000-row table",
)

CRASH = (
    "2 workers, 3 jobs of 24 s, lease 10 s, heartbeat 3 s; SIGKILL the owner of job 1",
    "1 s after the kill nothing has changed; 12 s later job 1 is 5 s overdue with a 15 s stale heartbeat",
    "the reaper returns it to pending, attempt count intact; the survivor finishes it: "
    "all three succeeded, job 1 at attempt_count 2, three result rows",
)

# Targets: (key, text, reference figure as text).
TARGETS = (
    ("claim_p50_16", "claim p50 <= 1.0 ms at 16 workers", "1.68 ms"),
    ("linear_16", "16 workers x 200 ms jobs within 2% of linear", "within 2%"),
    ("history_flat", "claim <= 10 shared buffers, p50 within 10% from 0 to 1,000,000 history rows", "7 then 4 hits"),
    ("drain_1", "trivial-job drain >= 1,000 jobs/s one job per claim", "not measured"),
    ("drain_100", "trivial-job drain >= 22,000 jobs/s with batch 100", "not measured"),
)
