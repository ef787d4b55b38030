"""Firing a JobQueue's spec.schedules with the right role: spec.database.schedulesSecret's DSN (a
producer role, read by the operator only) when given, else the backlog's. Each tick is enqueued
once by the database's key whichever role or replica fires (pgwork.operator.schedules)."""

from __future__ import annotations

from datetime import datetime

from pgwork.db import Queue
from pgwork.operator.db import DatabaseProblem, QueueCache, User, explain
from pgwork.operator.kube import Kube, KubeError
from pgwork.operator.schedules import Firing, fire_all
from pgwork.operator.secrets import read_dsn, secret_source
from pgwork.operator.spec import JobQueueSpec

# Said with a refusal of the firing role (fire_schedule is a producer's function).
DEFAULT_FIX = (
    "the operator fires schedules with spec.database.secretName's role: set spec.database.schedulesSecret "
    "to a Secret with the DSN of a role granted the producer profile (pgwork grant ROLE --profile producer)"
)
OWN_FIX = "grant the producer profile to spec.database.schedulesSecret's role (pgwork grant ROLE --profile producer)"


def firing_user(user: User) -> User:
    """The QueueCache user of a JobQueue's firing connection, apart from its backlog's so neither
    closes the other's pool ('/' is in no JobQueue name)."""
    return (user[0], f"{user[1]}/schedules")


def fire_jobqueue(
    kube: Kube, queues: QueueCache, user: User, spec: JobQueueSpec, *, queue: Queue, dsn: str, now: datetime | None
) -> Firing:
    """Fire the JobQueue's schedules with spec.database.schedulesSecret's DSN when given, else with
    the backlog's `queue` (`dsn`). A Secret that cannot be read or a role that may not enqueue is a
    problem to report, never a reason to stop the backlog's round."""
    ref = spec.database.schedules
    if ref is None or not spec.schedules:
        queues.release(firing_user(user))
        if not spec.schedules:
            return Firing([], [])
        return fire_all(queue, *user, spec.schedules, now=now, explain=lambda e: explain(e, dsn), fix=DEFAULT_FIX)
    where = secret_source(user[0], ref)
    own_dsn: str | None = None
    try:
        own_dsn = read_dsn(kube, user[0], ref)
        own = queues.get(firing_user(user), own_dsn)
    except (DatabaseProblem, KubeError) as exc:
        text = exc.message if isinstance(exc, DatabaseProblem) else str(exc)
        if own_dsn is not None:
            queues.discard(own_dsn)
        return Firing(
            [{"name": s.name} for s in spec.schedules], [text if text.startswith("Secret ") else f"{where}: {text}"]
        )
    return fire_all(own, *user, spec.schedules, now=now, explain=lambda e: explain(e, own_dsn), fix=OWN_FIX)
