"""The connection budget of the JobQueues sharing a PostgreSQL server (pgwork.budget): each
JobQueue's poll records its worst case (maxReplicas x the connections one worker pod may hold,
plus its CronJobs), and the sum over every JobQueue on the same server (host and port, whatever
the database or role) is compared with the connections the server lets any role take. The
reading of max_connections is shared per server and taken again every LIMITS_SECONDS."""

from __future__ import annotations

import threading
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import psycopg
import psycopg_pool
from psycopg.conninfo import conninfo_to_dict

from pgwork.budget import Budget, Demand, check_budget, worker_connections
from pgwork.db import Queue
from pgwork.db.rows import ConnectionLimits
from pgwork.errors import DatabaseError
from pgwork.operator.conditions import Condition, get_condition, set_condition
from pgwork.operator.spec import JobQueueSpec

# How long one reading of a server's max_connections serves (it changes only with a restart).
LIMITS_SECONDS = 300.0
CONDITION = "ConnectionBudget"


def server_of(dsn: str) -> str:
    """host:port of a connection string (every host of a multi-host one), the key JobQueues
    sharing a server's max_connections have in common (pure)."""
    try:
        params = conninfo_to_dict(dsn)
    except Exception:
        return dsn
    return f"{params.get('host') or 'localhost'}:{params.get('port') or '5432'}"


def per_pod(spec: JobQueueSpec) -> int:
    """The connections one worker pod of this JobQueue may hold at its busiest."""
    if spec.worker.flags.listen is False:  # --no-listen
        listening = False
    else:
        listening = spec.database.pooler is None or spec.database.listen is not None
    return worker_connections(spec.worker.concurrency, listening).busy


class Budgets:
    """Thread-safe: kopf runs the JobQueues' timers in parallel threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._demands: dict[Hashable, tuple[str, str, Demand]] = {}  # user -> (server, dsn, demand)
        self._limits: dict[str, tuple[float, ConnectionLimits]] = {}

    def check(
        self, user: Hashable, spec: JobQueueSpec, *, name: str, dsn: str, queue: Queue, now: float
    ) -> Budget | None:
        """This JobQueue's demand recorded, then the budget of its server. None behind a
        transaction-mode pooler: the server then sees only the pooler's pool."""
        if spec.database.pooler is not None:
            self.forget(user)
            return None
        server = server_of(dsn)
        with self._lock:
            self._demands[user] = (server, dsn, Demand(name, spec.scaling.max_replicas, per_pod(spec)))
            cached = self._limits.get(server)
        if cached is None or not 0 <= now - cached[0] <= LIMITS_SECONDS:
            cached = (now, queue.connection_limits())
            with self._lock:
                self._limits[server] = cached
        with self._lock:
            sharing = [(d, demand) for s, d, demand in self._demands.values() if s == server]
        # The operator itself holds one connection per distinct DSN on that server.
        pollers = len({d for d, _ in sharing})
        return check_budget([demand for _, demand in sharing], cached[1].max_connections, cached[1].reserved, pollers)

    def forget(self, user: Hashable) -> None:
        with self._lock:
            self._demands.pop(user, None)


def budget_condition(
    budgets: Budgets,
    user: Hashable,
    spec: JobQueueSpec,
    *,
    name: str,
    dsn: str,
    queue: Queue,
    conditions: Sequence[Mapping[str, Any]],
    generation: int | None,
    now: float,
) -> tuple[list[Condition], str | None]:
    """The conditions with ConnectionBudget set, and the message of a Warning event when the
    budget has just been found exceeded (once per transition, not every poll)."""
    try:
        budget = budgets.check(user, spec, name=name, dsn=dsn, queue=queue, now=now)
    except (DatabaseError, psycopg.Error, psycopg_pool.PoolTimeout):
        return [dict(c) for c in conditions], None  # the next poll reads it again
    if budget is None:
        message = "behind a transaction-mode pooler: the server sees at most the pooler's pool of connections"
        return set_condition(conditions, CONDITION, True, "Pooled", message, generation=generation, now=now), None
    previous = get_condition(conditions, CONDITION)
    was_exceeded = previous is not None and previous.get("status") == "False"
    reason = "Fits" if budget.fits else "Exceeded"
    updated = set_condition(conditions, CONDITION, budget.fits, reason, budget.message, generation=generation, now=now)
    return updated, (budget.message if not budget.fits and not was_exceeded else None)
