"""The Queue's lease renewals: the heartbeat of many leases in one statement and the worker
lease it can ride on (migration 0015). Split from pgwork.db.queue only to keep modules small.

A worker registers once (`register_worker`) and passes the `WorkerLease` with every renewal:
the first renewal that passes a job's token adopts it, and from then on the jobs the worker lease
covers are renewed by its one row, whatever their number. Fencing is unchanged: the answer for
each job still says whether *its token* holds it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime

from pgwork.db.base import QueueBase, check_seconds
from pgwork.db.connect import AnyConnection
from pgwork.db.rows import HeartbeatRow
from pgwork.durations import MAX_LEASE_SECONDS
from pgwork.errors import InvalidArgument
from pgwork.models import Lease, LeaseState, Renewal, WorkerLease
from pgwork.progress import Progress


def lease_states(leases: Sequence[Lease], rows: Sequence[HeartbeatRow]) -> dict[int, LeaseState]:
    """Each lease's state from the heartbeat's job rows (pure): no row is a lost lease."""
    held = {r.id: r.cancel_requested for r in rows if r.id is not None}
    states = {}
    for lease in leases:
        if lease.job_id not in held:
            states[lease.job_id] = LeaseState.LOST
        elif held[lease.job_id]:
            states[lease.job_id] = LeaseState.CANCEL_REQUESTED
        else:
            states[lease.job_id] = LeaseState.HELD
    return states


def worker_answer(rows: Sequence[HeartbeatRow]) -> bool:
    """Whether the worker's registration was renewed (pure): the heartbeat's row with no job id
    carries the worker lease's new expiry, NULL when the secret no longer matched."""
    return any(r.id is None and r.lease_expires_at is not None for r in rows)


class Renewals(QueueBase):
    def register_worker(
        self, owner: str, *, lease_seconds: float = 30.0, now: datetime | None = None, conn: AnyConnection | None = None
    ) -> WorkerLease:
        """Register `owner` for a worker lease and return it with its new secret. Registering a
        name that is registered already takes it over: the jobs the old registration covered are
        covered no longer (they keep the lease they had and live on only through their own tokens)."""
        if not owner:
            raise InvalidArgument("owner", "is empty", "pass the worker's id, e.g. its pod name")
        if not check_seconds(lease_seconds, "lease_seconds", MAX_LEASE_SECONDS) > 0:
            raise InvalidArgument("lease_seconds", "must be > 0", "e.g. 30, the worker's --lease")
        params = {"owner": owner, "lease": float(lease_seconds), "now": now}
        return WorkerLease(owner, self._scalar("register_worker", params, conn))

    def renew(
        self,
        leases: Sequence[Lease],
        *,
        lease_seconds: float = 30.0,
        worker: WorkerLease | None = None,
        now: datetime | None = None,
        conn: AnyConnection | None = None,
        progress: Mapping[int, Progress] | None = None,
    ) -> Renewal:
        """Renew many leases in one statement; says for each job whether it is still held and,
        with `worker`, whether its registration is (False: register again; the jobs were renewed
        row by row meanwhile, so none is lost). With `worker`, the jobs of its owner passed here are
        adopted (covered from the next renewal on) and its covered jobs not passed are uncovered.
        `progress` (by job id, checked by pgwork.progress.check_progress) is stored with the
        renewal of the jobs it names, fenced by the same tokens: no statement of its own."""
        check_seconds(lease_seconds, "lease_seconds", MAX_LEASE_SECONDS)
        if not leases and worker is None:
            return Renewal({}, None)
        reported = [progress.get(lease.job_id) if progress else None for lease in leases]
        params = {
            "ids": [lease.job_id for lease in leases],
            "tokens": [lease.token for lease in leases],
            "lease": float(lease_seconds),
            "progress": [p.fraction if p else None for p in reported] if progress else None,
            "notes": [p.note if p else None for p in reported] if progress else None,
            "now": now,
            "worker": worker.owner if worker else None,
            "secret": worker.secret if worker else None,
        }
        rows = self._many("heartbeat", params, HeartbeatRow, conn)
        return Renewal(lease_states(leases, rows), worker_answer(rows) if worker else None)
