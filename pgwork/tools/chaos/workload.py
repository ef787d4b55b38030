"""The chaos run's jobs: a pure function of the seed (see pgwork.tools.chaos.app for what each field does)."""

from __future__ import annotations

import random

from pgwork.models import NewJob

# Never import pgwork.tools.chaos.app here: importing it registers its handler in the process-wide
# registry, and the CLI imports this module for every command, `pgwork worker` included.
JOB_TYPE = "chaos"
MAX_ATTEMPTS = 6


def jobs(seed: int, count: int, *, spread: float, lease: float) -> list[NewJob]:
    """`count` jobs, made ready evenly over `spread` seconds so faults meet work all along.

    Mostly short work; a few jobs outlive the lease (only heartbeats keep them), some fail once
    and retry, a few fail for good and end dead.
    """
    if count < 1 or spread < 0 or lease <= 0:
        raise ValueError("count must be >= 1, spread >= 0 and lease > 0")
    rng = random.Random(f"workload-{seed}")
    out: list[NewJob] = []
    for n in range(count):
        draw = rng.random()
        if draw < 0.02:
            ms = lease * 1000 * rng.uniform(1.1, 1.6)
        elif draw < 0.10:
            ms = rng.uniform(100, 500)
        else:
            ms = rng.uniform(5, 60)
        payload: dict[str, object] = {"n": n, "ms": round(ms)}
        kind = rng.random()
        if kind < 0.02:
            payload["permanent"] = True
        elif kind < 0.12:
            payload["flaky"] = 1
        out.append(
            NewJob(
                JOB_TYPE,
                payload,
                key=f"chaos-{seed}-{n}",
                delay=round(spread * n / count, 3),
                max_attempts=MAX_ATTEMPTS,
            )
        )
    return out
