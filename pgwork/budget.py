"""How many server connections pgwork holds, and whether a fleet fits the server (pure).

A `pgwork worker` opens, by options:

- its pool: one connection at start (min_size 1), growing to `pool_size(concurrency)` while
  claims, finishes and handlers' progress writes overlap;
- the heartbeat's session connection, only while it holds jobs (closed when idle);
- the listener's session connection, only while listening (not behind a transaction-mode pooler
  unless PGWORK_LISTEN_DSN is given, and never with --no-listen).

So idle: 1 (+1 listening); busy: pool_size + 1 (+1 listening). Behind a transaction-mode pooler
those are client connections to the pooler; the server sees at most the pooler's pool size.
Each JobQueue also runs a reaper and a prune CronJob (one connection each while they run), and
the operator polls each database with one connection.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

# Past 8 runners more pool connections buy little (each holds one only for a statement).
MAX_POOL_FOR_RUNNERS = 8
# The CronJobs of one JobQueue that may run beside its workers: reaper and prune.
CRONJOB_CONNECTIONS = 2


def pool_size(concurrency: int) -> int:
    """The worker's pool: one per runner up to MAX_POOL_FOR_RUNNERS, plus one for the main loop
    and the finisher's writes."""
    return min(concurrency, MAX_POOL_FOR_RUNNERS) + 1


@dataclass(frozen=True)
class WorkerConnections:
    idle: int
    busy: int


def worker_connections(concurrency: int, listening: bool) -> WorkerConnections:
    listen = 1 if listening else 0
    return WorkerConnections(idle=1 + listen, busy=pool_size(concurrency) + 1 + listen)


@dataclass(frozen=True)
class Demand:
    """One JobQueue's worst case on its server: `max_replicas` pods of `per_pod` connections."""

    name: str
    max_replicas: int
    per_pod: int

    @property
    def worst_case(self) -> int:
        return self.max_replicas * self.per_pod + CRONJOB_CONNECTIONS


@dataclass(frozen=True)
class Budget:
    fits: bool
    worst_case: int
    available: int
    message: str


def check_budget(demands: Sequence[Demand], max_connections: int, reserved: int, pollers: int = 1) -> Budget:
    """Whether the JobQueues sharing a server fit in its connections at their worst case:
    sum(maxReplicas x per-pod connections + CronJobs) + the operator's `pollers` against
    max_connections - superuser_reserved_connections (- reserved_connections on 16+)."""
    worst = sum(d.worst_case for d in demands) + pollers
    available = max(0, max_connections - reserved)
    parts = " + ".join(
        f"{d.name} {d.max_replicas}x{d.per_pod}+{CRONJOB_CONNECTIONS}" for d in sorted(demands, key=lambda d: d.name)
    )
    if worst <= available:
        return Budget(True, worst, available, f"worst case {worst} of {available} connections ({parts} + operator)")
    return Budget(
        False,
        worst,
        available,
        f"worst case {worst} connections exceeds the server's {available} (max_connections {max_connections} - "
        f"{reserved} reserved): {parts} + operator; lower maxReplicas or worker.concurrency, raise max_connections, "
        "or put a transaction-mode pooler in front (database.pooler: transaction)",
    )
