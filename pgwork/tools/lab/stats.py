"""Small summaries of samples. Pure."""

from __future__ import annotations

import math
from collections.abc import Sequence


def percentile(samples: Sequence[float], pct: float) -> float:
    """The pct-th percentile by linear interpolation between closest ranks; NaN when empty."""
    if not 0 <= pct <= 100:
        raise ValueError(f"pct must be within 0..100, got {pct}")
    if not samples:
        return math.nan
    ordered = sorted(samples)
    rank = (len(ordered) - 1) * pct / 100
    low = math.floor(rank)
    high = math.ceil(rank)
    if low == high:
        return ordered[low]
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def pct_of_linear(jobs_per_second: float, workers: int, job_seconds: float) -> float:
    """Throughput as a share of the ideal: every worker busy with work all the time."""
    if workers < 1 or job_seconds <= 0:
        raise ValueError("workers must be >= 1 and job_seconds > 0")
    return 100.0 * jobs_per_second / (workers / job_seconds)


def duplicates(executed_ids: Sequence[int]) -> int:
    """Executions beyond the first of each job."""
    return len(executed_ids) - len(set(executed_ids))
