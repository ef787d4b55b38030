"""The operator's database edge: one small Queue per distinct DSN, shared by the JobQueues
that use it, closed when the last of them goes; failures turned into a reason and a message."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime

import psycopg
import psycopg_pool

from pgwork.credentials import scrub
from pgwork.db import Queue
from pgwork.dsn import database_of
from pgwork.errors import (
    AccessDenied,
    BadConnectionString,
    DatabaseError,
    EncodingRefused,
    NotMigrated,
    SchemaTooNew,
    Unreachable,
)
from pgwork.horizon import HorizonFigures, figures, remember
from pgwork.models import COUNTS, TypeStats
from pgwork.operator.scaling import LimitedWork

QueueFactory = Callable[[str], Queue]
User = tuple[str, str]  # (namespace, jobqueue)


class DatabaseProblem(Exception):
    """Why the queue's database cannot be read; `reason` is the condition reason."""

    def __init__(self, reason: str, message: str) -> None:
        self.reason = reason
        self.message = message
        super().__init__(f"{reason}: {message}")


@dataclass(frozen=True)
class QueueBacklog:
    ready: int
    scheduled: int
    retrying: int
    running: int
    dead: int
    oldest_wait_seconds: float
    max_heartbeat_age_seconds: float
    # The counts (names from pgwork.models.COUNTS) that are "at least": a type's count reached the cap.
    lower_bounds: tuple[str, ...] = ()
    # The job types with a fleet-wide limit, their share of the counts and the limit (scaling caps them).
    limited: tuple[LimitedWork, ...] = ()
    # Jobs waiting for parents (issue 27): shown, never scaled on, since no worker can take them.
    # Each type's count stops at the same cap; WAITING is in lower_bounds when one reached it.
    waiting: int = 0


# The name of the waiting count among lower_bounds (beside pgwork.models.COUNTS).
WAITING = "waiting"


def count_cap(max_replicas: int, target_backlog_per_worker: int) -> int:
    """The count past which the scaling decision cannot change: any backlog above
    maxReplicas x target already asks for maxReplicas (pure)."""
    return max(1, max_replicas) * max(1, target_backlog_per_worker) + 1


# How long a poll waits for a connection. A worker waits out the pool's 30 s (a busy database
# is no reason to drop a finished job's write), but the operator only reads: waiting that long
# on a database that went away delayed database_up 0 (and PgworkQueueDatabaseDown) by 30 s and
# held a kopf timer thread for as long. A poll that fails is simply tried again next round.
POLL_POOL_TIMEOUT = 5.0


def default_factory(dsn: str) -> Queue:
    # No prepared statements: a JobQueue's database may sit behind a transaction-mode pooler
    # (spec.database.pooler), and a poll every few seconds gains little from them.
    return Queue(dsn, pool_size=1, application_name="pgwork-operator", pool_timeout=POLL_POOL_TIMEOUT, prepare=False)


def explain(exc: BaseException, secret: str | None = None) -> DatabaseProblem:
    """A condition reason and a one-line message for a failure while using the connection string
    `secret`. The one place libpq's text passes: scrubbed of the password and of every run of
    four or more of its characters (and of the whole value), whatever libpq chose to quote."""
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    text = scrub(first, secret)
    if isinstance(exc, AccessDenied):
        # Before Unreachable (its base): no retry helps, someone must fix the credentials.
        return DatabaseProblem("AccessDenied", text)
    if isinstance(exc, Unreachable):
        return DatabaseProblem("InvalidDSN" if isinstance(exc, BadConnectionString) else "Unreachable", text)
    if isinstance(exc, NotMigrated | SchemaTooNew | EncodingRefused):
        return DatabaseProblem(type(exc).__name__, text)
    if isinstance(exc, psycopg_pool.PoolTimeout | psycopg.OperationalError):
        return DatabaseProblem("Unreachable", text)
    return DatabaseProblem("QueryFailed", text)


class QueueCache:
    """Thread-safe: kopf runs sync handlers for different JobQueues in parallel threads."""

    def __init__(self, factory: QueueFactory = default_factory) -> None:
        self._factory = factory
        self._lock = threading.Lock()
        self._queues: dict[str, Queue] = {}
        self._users: dict[User, str] = {}
        # key → (read at, cap, stats of every job type, waiting jobs by type): JobQueues on one
        # database share a reading.
        self._stats: dict[str, tuple[float, int | None, list[TypeStats], dict[str, int]]] = {}
        # user → (database_of its DSN, its job types): who consumes what on each database.
        self._consumers: dict[User, tuple[str, frozenset[str]]] = {}
        self.statements = 0  # readings made (a stats and a waiting_counts statement each), for benchmarks
        # key → (read at, figures, first sighting of each holder): the vacuum horizon, one reading
        # per database per round like the backlog; the sightings give a hidden session an age.
        self._horizons: dict[str, tuple[float, HorizonFigures, dict[str, datetime]]] = {}

    @staticmethod
    def key(dsn: str) -> str:
        return hashlib.sha256(dsn.encode()).hexdigest()

    def get(self, user: User, dsn: str) -> Queue:
        key = self.key(dsn)
        with self._lock:
            previous = self._users.get(user)
            self._users[user] = key
            if previous is not None and previous != key:
                self._close_unused(previous)
            queue = self._queues.get(key)
        if queue is not None:
            return queue
        try:
            # Outside the lock: connecting may take the connect timeout.
            queue = self._factory(dsn)
        except (DatabaseError, psycopg.Error, psycopg_pool.PoolTimeout) as exc:
            raise explain(exc, dsn) from None
        with self._lock:
            existing = self._queues.setdefault(key, queue)
        if existing is not queue:
            queue.close()
        return existing

    def backlog(
        self, dsn: str, queue: Queue, job_types: Iterable[str], *, now: float, max_age: float, cap: int | None = None
    ) -> QueueBacklog:
        """The backlog for `job_types`, from one `stats` reading of the whole database shared
        by every JobQueue on it within `max_age` seconds: with 100 JobQueues on one database a
        round costs one statement, not 100. Counts stop at `cap` (None: exact), so the reading
        costs a few index pages per job type whatever the backlog; a reading made with a lower
        cap than this JobQueue needs is not reused."""
        key = self.key(dsn)
        with self._lock:
            cached = self._stats.get(key)
        if cached is None or now - cached[0] > max_age or now < cached[0] or not _covers(cached[1], cap):
            try:
                stats = queue.stats(cap=cap)
                # Capped per type like the backlog; the partial index of waiting rows answers it.
                waiting = queue.waiting(cap=cap)
            except (DatabaseError, psycopg.Error, psycopg_pool.PoolTimeout) as exc:
                raise explain(exc, dsn) from None
            cached = (now, cap, stats, waiting)
            with self._lock:
                self._stats[key] = cached
                self.statements += 1
        return sum_backlog(cached[2], job_types, cached[3], cap)

    def without_consumer(self, user: User, dsn: str, job_types: Iterable[str]) -> tuple[str, dict[str, int]]:
        """Record that `user` takes `job_types` from `dsn`'s database, and answer that database's
        name and its types with ready jobs that no JobQueue this operator watches takes, from the
        reading `backlog` just made (no statement of its own). Two roles' DSNs for one database
        count as one database."""
        database = database_of(dsn)
        with self._lock:
            self._consumers[user] = (database, frozenset(job_types))
            consumed = {t for db, types in self._consumers.values() if db == database for t in types}
            cached = self._stats.get(self.key(dsn))
        return database, types_without_consumer(cached[2] if cached else [], consumed)

    def horizon(self, dsn: str, queue: Queue, *, now: float, max_age: float) -> HorizonFigures:
        """Who holds back vacuum on the database and for how long (pgwork.horizon), shared by
        every JobQueue on it within `max_age` seconds like the backlog. Where the role may not see
        another role's transaction start, the age counts from this operator's first sighting of
        the same holder with the same xmin: a lower bound, never an invention."""
        key = self.key(dsn)
        with self._lock:
            cached = self._horizons.get(key)
        if cached is not None and 0 <= now - cached[0] <= max_age:
            return cached[1]
        try:
            horizon = queue.vacuum_horizon()
        except (DatabaseError, psycopg.Error, psycopg_pool.PoolTimeout) as exc:
            raise explain(exc, dsn) from None
        seen = remember(horizon, cached[2] if cached is not None else {})
        answer = figures(horizon, seen)
        with self._lock:
            self._horizons[key] = (now, answer, seen)
        return answer

    def discard(self, dsn: str) -> None:
        """Forget a Queue that failed, so the next round connects afresh."""
        with self._lock:
            queue = self._queues.pop(self.key(dsn), None)
            self._stats.pop(self.key(dsn), None)
            self._horizons.pop(self.key(dsn), None)
        if queue is not None:
            queue.close()

    def release(self, user: User) -> None:
        with self._lock:
            self._consumers.pop(user, None)
            key = self._users.pop(user, None)
            if key is not None:
                self._close_unused(key)

    def _close_unused(self, key: str) -> None:
        if key not in self._users.values():
            queue = self._queues.pop(key, None)
            self._stats.pop(key, None)
            self._horizons.pop(key, None)
            if queue is not None:
                queue.close()

    def open_count(self) -> int:
        with self._lock:
            return len(self._queues)

    def close_all(self) -> None:
        with self._lock:
            queues = list(self._queues.values())
            self._queues.clear()
            self._users.clear()
        for queue in queues:
            queue.close()


def _covers(read_with: int | None, wanted: int | None) -> bool:
    """Whether counts capped at `read_with` answer a question capped at `wanted` (None: exact)."""
    return read_with is None or (wanted is not None and wanted <= read_with)


def types_without_consumer(all_stats: Iterable[TypeStats], consumed: set[str]) -> dict[str, int]:
    """Ready jobs per type that nobody in `consumed` takes (pure): they would wait forever."""
    return {s.job_type: s.ready for s in all_stats if s.ready > 0 and s.job_type not in consumed}


def sum_backlog(
    all_stats: Iterable[TypeStats],
    job_types: Iterable[str],
    waiting: Mapping[str, int] | None = None,
    cap: int | None = None,
) -> QueueBacklog:
    """The backlog summed over `job_types` (pure). A sum is a lower bound when one of its terms is;
    a type's waiting count is one when it reached `cap`."""
    wanted = set(job_types)
    stats = [s for s in all_stats if s.job_type in wanted]
    capped = {name for s in stats for name in s.lower_bounds()}
    waits = [n for t, n in (waiting or {}).items() if t in wanted]
    return QueueBacklog(
        ready=sum(s.ready for s in stats),
        scheduled=sum(s.scheduled for s in stats),
        retrying=sum(s.retrying for s in stats),
        running=sum(s.running for s in stats),
        dead=sum(s.dead for s in stats),
        oldest_wait_seconds=max((s.oldest_wait_seconds for s in stats), default=0.0),
        max_heartbeat_age_seconds=max((s.max_heartbeat_age_seconds for s in stats), default=0.0),
        lower_bounds=tuple(name for name in COUNTS if name in capped)
        + ((WAITING,) if cap is not None and any(n >= cap for n in waits) else ()),
        limited=tuple(
            LimitedWork(s.job_type, s.ready, s.running, s.max_running, s.rate_count)
            for s in stats
            if s.max_running is not None or s.rate_count is not None
        ),
        waiting=sum(waits),
    )


def jobs_by_owner(queue: Queue, job_types: Iterable[str]) -> dict[str, int]:
    try:
        return queue.running_by_owner(list(job_types))
    except (DatabaseError, psycopg.Error, psycopg_pool.PoolTimeout) as exc:
        raise explain(exc, queue.dsn) from None
