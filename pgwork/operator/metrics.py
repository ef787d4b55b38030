"""The operator's Prometheus gauges, one series per JobQueue (labels namespace, jobqueue).
Names are the contract in docs/architecture.md."""

from __future__ import annotations

import contextlib

from prometheus_client import CollectorRegistry, Gauge, start_http_server

from pgwork.horizon import HorizonFigures
from pgwork.models import COUNTS
from pgwork.operator.db import WAITING, QueueBacklog

LABELS = ("namespace", "jobqueue")
# The counts pgwork_queue_count_lower_bound names: the backlog's and the waiting jobs'.
FIGURES = (*COUNTS, WAITING)


class OperatorMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()

        def gauge(name: str, text: str) -> Gauge:
            return Gauge(name, text, LABELS, registry=self.registry)

        self.ready = gauge("pgwork_queue_ready_jobs", "Jobs ready to run now")
        self.scheduled = gauge("pgwork_queue_scheduled_jobs", "Pending jobs not yet due (delay or retry backoff)")
        self.running = gauge("pgwork_queue_running_jobs", "Jobs held by a worker")
        self.dead = gauge("pgwork_queue_dead_jobs", "Jobs that ran out of attempts")
        self.waiting = gauge(
            "pgwork_queue_waiting_jobs", "Jobs waiting for their parents to succeed (not part of the scaling backlog)"
        )
        self.oldest_wait = gauge("pgwork_queue_oldest_wait_seconds", "Age of the oldest ready job")
        self.heartbeat_age = gauge(
            "pgwork_queue_max_heartbeat_age_seconds", "Longest time since a running job's last heartbeat"
        )
        self.desired = gauge("pgwork_queue_desired_replicas", "Workers the operator wants")
        self.current = gauge("pgwork_queue_current_replicas", "Workers the Deployment asks for")
        self.heartbeat_interval = gauge(
            "pgwork_queue_heartbeat_interval_seconds", "Heartbeat interval the workers are configured with"
        )
        self.database_up = gauge("pgwork_queue_database_up", "1 when the queue's database answered the last poll")
        # The count gauges stop at maxReplicas x targetBacklogPerWorker + 1: 1 here says that
        # figure's gauge is a lower bound ("at least"), 0 that it is exact.
        self.lower_bound = Gauge(
            "pgwork_queue_count_lower_bound",
            "1 when the count gauge named by `figure` reached the operator's cap, so is a lower bound",
            (*LABELS, "figure"),
            registry=self.registry,
        )
        # Per database (host:port/dbname), not per JobQueue: a type nobody takes belongs to none.
        self.without_consumer = Gauge(
            "pgwork_jobs_without_consumer",
            "Ready jobs of a type that no JobQueue on the database lists (they wait for a worker that does not exist)",
            ("database", "job_type"),
            registry=self.registry,
        )
        self._orphans: dict[str, set[str]] = {}
        # The vacuum horizon (issue 23): PgworkVacuumHorizonHeld reads the age.
        self.horizon_age = gauge(
            "pgwork_vacuum_horizon_age_seconds",
            "How long the oldest snapshot holding back vacuum on the queue's database has been held "
            "(0 when none, or when its start cannot be seen yet)",
        )
        self.horizon_xid_age = gauge(
            "pgwork_vacuum_horizon_xid_age", "Transaction IDs since the oldest snapshot holding back vacuum"
        )
        self.dead_tuples = gauge("pgwork_jobs_dead_tuples", "Dead tuples in the jobs table (statistics, approximate)")
        self.autovacuum = gauge("pgwork_jobs_autovacuum_enabled", "1 when autovacuum can run on the jobs table")
        self._all = (
            self.ready,
            self.scheduled,
            self.running,
            self.dead,
            self.waiting,
            self.oldest_wait,
            self.heartbeat_age,
            self.desired,
            self.current,
            self.heartbeat_interval,
            self.database_up,
            self.horizon_age,
            self.horizon_xid_age,
            self.dead_tuples,
            self.autovacuum,
        )

    def serve(self, port: int, addr: str = "0.0.0.0") -> None:  # noqa: S104 - scraped from inside the cluster
        start_http_server(port, addr=addr, registry=self.registry)

    def record(
        self,
        namespace: str,
        jobqueue: str,
        backlog: QueueBacklog | None,
        *,
        desired: int | None,
        current: int | None,
        heartbeat_seconds: float,
    ) -> None:
        labels = (namespace, jobqueue)
        self.database_up.labels(*labels).set(1 if backlog is not None else 0)
        self.heartbeat_interval.labels(*labels).set(heartbeat_seconds)
        if backlog is not None:
            self.ready.labels(*labels).set(backlog.ready)
            self.scheduled.labels(*labels).set(backlog.scheduled)
            self.running.labels(*labels).set(backlog.running)
            self.dead.labels(*labels).set(backlog.dead)
            self.waiting.labels(*labels).set(backlog.waiting)
            self.oldest_wait.labels(*labels).set(backlog.oldest_wait_seconds)
            self.heartbeat_age.labels(*labels).set(backlog.max_heartbeat_age_seconds)
            for name in FIGURES:
                self.lower_bound.labels(*labels, name).set(1 if name in backlog.lower_bounds else 0)
        if desired is not None:
            self.desired.labels(*labels).set(desired)
        if current is not None:
            self.current.labels(*labels).set(current)

    def record_without_consumer(self, database: str, ready: dict[str, int]) -> None:
        """Set the database's orphan types' gauges; drop the series of types taken care of since."""
        for gone in self._orphans.get(database, set()) - set(ready):
            with contextlib.suppress(KeyError):
                self.without_consumer.remove(database, gone)
        for job_type, count in ready.items():
            self.without_consumer.labels(database, job_type).set(count)
        self._orphans[database] = set(ready)

    def record_horizon(self, namespace: str, jobqueue: str, fig: HorizonFigures | None) -> None:
        """The horizon gauges; None (not read this round) leaves them as they were."""
        if fig is None:
            return
        labels = (namespace, jobqueue)
        self.horizon_age.labels(*labels).set(fig.age_seconds)
        self.horizon_xid_age.labels(*labels).set(fig.xid_age)
        self.dead_tuples.labels(*labels).set(fig.dead_tuples)
        self.autovacuum.labels(*labels).set(1 if fig.autovacuum else 0)

    def forget(self, namespace: str, jobqueue: str) -> None:
        for gauge in self._all:
            with contextlib.suppress(KeyError):
                gauge.remove(namespace, jobqueue)
        for name in FIGURES:
            with contextlib.suppress(KeyError):
                self.lower_bound.remove(namespace, jobqueue, name)
