"""The worker's Prometheus metrics and its small HTTP server (/metrics, /healthz, /readyz).

Names are the contract in docs/architecture.md; docs/metrics.md has the table. Each worker keeps
its own CollectorRegistry so several in one process (tests) never collide.
"""

from __future__ import annotations

import functools
import socket
import sys
import threading
import time
from collections.abc import Callable, Collection, Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from pgwork.worker.attempt import AttemptState
from pgwork.worker.holdings import Holdings

# Claims take about a millisecond; start fine enough to see that.
CLAIM_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
# Jobs run from 200 ms to many minutes.
JOB_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1200.0, 1800.0)

# A batch handler's calls: from one job to MAX_BATCH.
BATCH_SIZE_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
# How long a batch's first job waited for the batch to fill (bounded by batch_wait, at most 5 min).
BATCH_WAIT_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 60.0, 300.0)

OUTCOMES = ("succeeded", "duplicate", "retry", "dead", "cancelled", "lease_lost", "released")
# Job types with series of their own; any further type a worker serves (or a claim reports) shares
# the label OTHER_TYPE. Each type costs about 155 series (the duration histogram alone is 7
# outcomes x 18), so 10,000 types were 1.55M series and 136 MB a scrape; capped, a worker exports
# at most (MAX_TYPE_LABELS + 1) x ~155 + a few, whatever producers and handlers do.
MAX_TYPE_LABELS = 50
# Not a job type any pgwork check lets through (parentheses), so it never merges with a real one's.
OTHER_TYPE = "(other)"


class WorkerMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self._type_labels: dict[str, str] = {}
        self._type_lock = threading.Lock()
        r = self.registry
        self.claim_duration = Histogram(
            "pgwork_claim_duration_seconds",
            "Time one claim statement took, including its commit.",
            buckets=CLAIM_BUCKETS,
            registry=r,
        )
        self.job_duration = Histogram(
            "pgwork_job_duration_seconds",
            "Time from a job's claim to its finish, by job type and outcome.",
            ["job_type", "outcome"],
            buckets=JOB_BUCKETS,
            registry=r,
        )
        self.jobs_finished = Counter(
            "pgwork_jobs_finished_total",
            "Attempts this worker finished, by job type and outcome.",
            ["job_type", "outcome"],
            registry=r,
        )
        self.in_flight = Gauge("pgwork_jobs_in_flight", "Jobs this worker holds (running or claimed).", registry=r)
        self.last_heartbeat = Gauge(
            "pgwork_worker_last_heartbeat_timestamp_seconds",
            "Unix time of this worker's last successful heartbeat round.",
            registry=r,
        )
        self.heartbeat_interval = Gauge(
            "pgwork_worker_heartbeat_interval_seconds", "Configured heartbeat interval.", registry=r
        )
        self.heartbeat_age = Gauge(
            "pgwork_worker_heartbeat_age_seconds",
            "Seconds since the least recently renewed lease this worker holds was claimed or renewed "
            "(0 while it holds none).",
            registry=r,
        )
        # Progress per job type as a sum and a count, not a per-job series (job ids are unbounded)
        # nor a mean (means of pods do not add up): sum by (job_type) of the one over the other is
        # the fleet's mean progress of the jobs that report one.
        self.progress_sum = Gauge(
            "pgwork_job_progress_sum",
            "Sum of the newest progress (0..1) of the jobs this worker runs that reported one, by job type.",
            ["job_type"],
            registry=r,
        )
        self.progress_jobs = Gauge(
            "pgwork_job_progress_reporting",
            "Jobs this worker runs that reported progress, by job type.",
            ["job_type"],
            registry=r,
        )
        self.lease_lost = Counter(
            "pgwork_lease_lost_total",
            "Jobs whose lease this worker lost (renewal or finish matched no row).",
            ["job_type"],
            registry=r,
        )
        self.timed_out = Counter(
            "pgwork_jobs_timed_out_total",
            "Attempts that passed their hard timeout, by job type (each also counts as retry or dead).",
            ["job_type"],
            registry=r,
        )
        self.abandoned = Counter(
            "pgwork_jobs_abandoned_total",
            "Attempts whose handler did not return when told to stop after its timeout: failed without it, "
            "its thread given up on and replaced.",
            ["job_type"],
            registry=r,
        )
        self.batch_size = Histogram(
            "pgwork_batch_size",
            "Jobs per batch handler call, by job type.",
            ["job_type"],
            buckets=BATCH_SIZE_BUCKETS,
            registry=r,
        )
        self.batch_wait = Histogram(
            "pgwork_batch_wait_seconds",
            "Time from the claim of a batch's first job to the batch handler's call (waiting for the batch "
            "to fill, at most its batch_wait, plus waiting for a free slot), by job type.",
            ["job_type"],
            buckets=BATCH_WAIT_BUCKETS,
            registry=r,
        )
        self.limit_skipped = Counter(
            "pgwork_claim_limit_skipped_total",
            "Claims that left out a limited job type because another session held its limit row "
            "(a claim never waits on it for more than a few milliseconds), by job type.",
            ["job_type"],
            registry=r,
        )
        self.abandoned_threads = Gauge(
            "pgwork_worker_abandoned_threads",
            "Handler threads this worker gave up on that are still running (past --max-abandoned it drains and exits).",
            registry=r,
        )

    def type_label(self, job_type: str) -> str:
        """The `job_type` label for a type: itself for the first MAX_TYPE_LABELS types seen (those
        the worker serves first, in watch's order), OTHER_TYPE for every one after."""
        label = self._type_labels.get(job_type)
        if label is not None:
            return label
        with self._type_lock:
            own = len(self._type_labels) < MAX_TYPE_LABELS
            return self._type_labels.setdefault(job_type, job_type if own else OTHER_TYPE)

    def watch(self, holdings: Holdings, job_types: Iterable[str]) -> None:
        """Called once at worker start: the series every dashboard and alert reads exist from the
        first scrape, at zero, for every job type label this worker takes (at most
        MAX_TYPE_LABELS + 1); the heartbeat age is read from the holdings at each scrape. Until the
        first heartbeat round, the last-heartbeat timestamp is the start time: no renewal is owed
        before one interval has passed."""
        by_label: dict[str, set[str]] = {}
        for job_type in job_types:
            by_label.setdefault(self.type_label(job_type), set()).add(job_type)
        for label, types in by_label.items():
            self.progress_sum.labels(label).set_function(functools.partial(_progress_sum, holdings, types))
            self.progress_jobs.labels(label).set_function(functools.partial(_progress_count, holdings, types))
            self.lease_lost.labels(label)
            self.timed_out.labels(label)
            self.abandoned.labels(label)
            self.limit_skipped.labels(label)
            for outcome in OUTCOMES:
                self.jobs_finished.labels(label, outcome)
                self.job_duration.labels(label, outcome)
        self.last_heartbeat.set(time.time())
        self.heartbeat_age.set_function(lambda: heartbeat_age(holdings, time.monotonic()))

    def finished(self, job_type: str, outcome: str, seconds: float) -> None:
        label = self.type_label(job_type)
        self.jobs_finished.labels(label, outcome).inc()
        self.job_duration.labels(label, outcome).observe(seconds)
        if outcome == "lease_lost":
            self.lease_lost.labels(label).inc()

    def claim_skipped(self, job_type: str) -> None:
        self.limit_skipped.labels(self.type_label(job_type)).inc()

    def heartbeat_ok(self) -> None:
        self.last_heartbeat.set(time.time())


def heartbeat_age(holdings: Holdings, now: float) -> float:
    """Seconds since the oldest renewal among the leases the heartbeat renews (a claim counts as
    the first renewal). Jobs finishing, and jobs whose lease is already lost, are left out, as the
    heartbeat leaves them out: nothing is owed for them."""
    renewed = [
        h.lease_deadline - h.lease_seconds
        for h in holdings.snapshot()
        if h.state in (AttemptState.WAITING, AttemptState.RUNNING) and not h.job.lease_lost
    ]
    return max(0.0, now - min(renewed)) if renewed else 0.0


def progress_figures(holdings: Holdings, job_types: str | Collection[str]) -> tuple[int, float]:
    """How many running jobs of `job_types` reported progress, and the sum of their newest fractions."""
    wanted = {job_types} if isinstance(job_types, str) else job_types
    reported = [
        p.fraction
        for h in holdings.snapshot()
        if h.state is AttemptState.RUNNING
        and h.claimed.job_type in wanted
        and (p := h.job.reported_progress) is not None
    ]
    return len(reported), sum(reported)


def _progress_sum(holdings: Holdings, job_types: Collection[str]) -> float:
    return progress_figures(holdings, job_types)[1]


def _progress_count(holdings: Holdings, job_types: Collection[str]) -> float:
    return progress_figures(holdings, job_types)[0]


# A scraper that gave up (timeout, a stopped-then-resumed worker) closes its end: writing the
# reply then fails. Nothing is wrong with the worker; say nothing.
GONE = (BrokenPipeError, ConnectionResetError, ConnectionAbortedError, TimeoutError)


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: socket.socket | tuple[bytes, socket.socket], client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], GONE):
            return
        super().handle_error(request, client_address)


class MetricsServer:
    """Serves /metrics, /healthz (the worker loop is alive) and /readyz (it can take jobs)."""

    def __init__(
        self,
        port: int,
        metrics: WorkerMetrics,
        healthy: Callable[[], bool],
        ready: Callable[[], bool],
        host: str = "0.0.0.0",  # noqa: S104 - scraped from outside the pod
    ) -> None:
        registry = metrics.registry

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                if path == "/metrics":
                    self._reply(200, generate_latest(registry), CONTENT_TYPE_LATEST)
                elif path == "/healthz":
                    ok = healthy()
                    self._reply(200 if ok else 503, b"ok\n" if ok else b"worker loop stalled\n")
                elif path == "/readyz":
                    ok = ready()
                    self._reply(200 if ok else 503, b"ready\n" if ok else b"not ready (starting or draining)\n")
                else:
                    self._reply(404, b"try /metrics, /healthz or /readyz\n")

            def _reply(self, status: int, body: bytes, content_type: str = "text/plain; charset=utf-8") -> None:
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", content_type)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except GONE:
                    self.close_connection = True

            def log_message(self, format: str, *args: object) -> None:
                pass  # scrapes every few seconds would drown the log

        self._server = _Server((host, port), Handler)
        self.port = int(self._server.server_address[1])
        self._thread = threading.Thread(target=self._server.serve_forever, name="pgwork-metrics", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
