"""The worker's Prometheus metrics and its small HTTP server (/metrics, /healthz, /readyz).

Names are the contract in docs/architecture.md; docs/metrics.md has the table. Each worker keeps
its own CollectorRegistry so several in one process (tests) never collide.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest

# Claims take about a millisecond; start fine enough to see that.
CLAIM_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
# Jobs run from 200 ms to many minutes.
JOB_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1200.0, 1800.0)

OUTCOMES = ("succeeded", "duplicate", "retry", "dead", "cancelled", "lease_lost", "released")


class WorkerMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
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
        self.lease_lost = Counter(
            "pgwork_lease_lost_total",
            "Jobs whose lease this worker lost (renewal or finish matched no row).",
            ["job_type"],
            registry=r,
        )

    def finished(self, job_type: str, outcome: str, seconds: float) -> None:
        self.jobs_finished.labels(job_type, outcome).inc()
        self.job_duration.labels(job_type, outcome).observe(seconds)
        if outcome == "lease_lost":
            self.lease_lost.labels(job_type).inc()

    def heartbeat_ok(self) -> None:
        self.last_heartbeat.set(time.time())


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
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                pass  # scrapes every few seconds would drown the log

        self._server = ThreadingHTTPServer((host, port), Handler)
        self._server.daemon_threads = True
        self.port = int(self._server.server_address[1])
        self._thread = threading.Thread(target=self._server.serve_forever, name="pgwork-metrics", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
