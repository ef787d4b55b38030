"""The Workers page's rows: the running jobs grouped by the worker that holds them (pure).

A worker's own lease row (pgwork.worker_leases, migration 15) is readable by the schema owner only,
because it holds the worker's secret; every reader may read the running jobs' *effective* lease
(pgwork.running_jobs: the job's own lease or its worker's, whichever lasts longer). So a worker is
shown through the jobs it holds: how many, its freshest heartbeat, its lease's expiry, and whether
any of them looks stuck. A worker registered but holding nothing is not listed.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from pgwork.db.rows import RunningRow


@dataclass(frozen=True)
class WorkerRow:
    owner: str
    running: int
    heartbeat_age: float  # seconds since the freshest heartbeat of any of its jobs
    lease_left: float  # seconds until the last of its leases lapses (negative: lapsed)
    stuck: int  # its jobs that look stuck (data.is_stuck)
    job_types: tuple[str, ...]  # the types it runs, sorted


def workers_from(rows: Iterable[tuple[RunningRow, bool]], limit: int) -> tuple[list[WorkerRow], bool]:
    """The running jobs (each with whether it looks stuck) grouped by owner, stalest worker first
    (those with a stuck job, then the oldest freshest heartbeat); at most `limit`, and whether
    more were left off."""
    groups: dict[str, list[tuple[RunningRow, bool]]] = {}
    for row, stuck in rows:
        groups.setdefault(row.lease_owner, []).append((row, stuck))
    workers = [
        WorkerRow(
            owner=owner,
            running=len(held),
            heartbeat_age=min(r.since_heartbeat_seconds for r, _ in held),
            lease_left=max(r.lease_remaining_seconds for r, _ in held),
            stuck=sum(1 for _, s in held if s),
            job_types=tuple(sorted({r.job_type for r, _ in held})),
        )
        for owner, held in groups.items()
    ]
    workers.sort(key=lambda w: (w.stuck == 0, -w.heartbeat_age, w.owner))
    return workers[:limit], len(workers) > limit
