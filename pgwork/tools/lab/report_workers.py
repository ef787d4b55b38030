"""docs/benchmarks.md sections 13 and 14: the real `pgwork worker` process (issue 13's targets). Pure."""

from __future__ import annotations

from collections.abc import Sequence

from pgwork.tools.lab import linear
from pgwork.tools.lab.pivot import section, select
from pgwork.tools.lab.results import Row


def render(rows: Sequence[Row], plots: Sequence[str]) -> list[str]:
    parts = section(
        "## 13. The worker drain, beside its own API",
        select(rows, "worker-drain"),
        "One real `pgwork worker --burst` process drains trivial jobs; in the same rounds, interleaved, one "
        "process runs the Queue API loop at the same batch (claim N, then `succeed` for batch 1 or one "
        "`succeed_many`). `pgwork worker (baseline)` is another checkout's worker (`PGWORK_LAB_BASELINE=DIR`) "
        "and `pgqueuer` the peer (`pip install 'pgwork[peers]'`, timed in its own process since it deletes "
        "finished rows), when the run had them. At batch 1 the reference design's bare loop runs in the same "
        "rounds (its SKIP LOCKED claim, then an unfenced completion, on one connection); `vs bare loop` is "
        "the median over rounds of the ratio within one round (both drift alike inside a round), its lowest "
        "and highest beside it. Target (issue 13): "
        "`pgwork worker --batch 1 --concurrency 1` >= 80% of the bare loop. Median over rounds, min and max "
        "beside it; pgwork's rates from the rows (first claim to last completion).",
        ("runner", "batch"),
    )
    parts += [f"![{p}]({p})" for p in plots if "worker-drain" in p]
    parts += section(
        "## 14. A burst of long jobs on a fleet of idle workers",
        select(rows, linear.NAME),
        "Real `pgwork worker --concurrency 1` processes, started first and idle on LISTEN (`--poll 5m`, so only "
        "the NOTIFY of the insert wakes them); the jobs are inserted in one transaction. Linear is every "
        "worker busy from the insert on (jobs x length / workers); `from insert` is the insert's `created_at` "
        "to the last `completed_at`, `from first claim` starts at the first `started_at` (as the lab's claim "
        "experiment and the reference measure). The claim round trip is the workers' own "
        "`pgwork_claim_duration_seconds` histogram over the round: a one-job worker sends the finished "
        "job's write and its next claim in one flush, so that round trip includes the finish (two short "
        "transactions); its p50 is interpolated inside its bucket, `claims <= 1 ms` is exact (1 ms is a "
        "bucket bound). Beside it in the same rounds: the lab's SKIP LOCKED claimers (one process each, "
        "`Queue.claim`, `time.sleep` as the work). Targets (issue 13): >= 98% of linear from the insert, "
        "claim p50 <= 1.0 ms at 16 workers. Median over rounds, the lowest beside it.",
        ("series", "workers"),
    )
    return parts
