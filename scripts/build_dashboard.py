"""Builds the Grafana dashboard for pgwork (monitoring/grafana/pgwork-dashboard.json).

The JSON is generated so every panel shares the same variables and layout rules; run
`python scripts/build_dashboard.py` after editing, `--check` to fail on drift (the tests do).
Metric names are the contract in docs/architecture.md.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
OUTPUT = ROOT / "monitoring" / "grafana" / "pgwork-dashboard.json"

UID = "pgwork-overview"
TITLE = "pgwork / Queues"
QUEUE = 'namespace=~"$namespace", jobqueue=~"$jobqueue"'
WIDTH = 24
HEIGHT = 8

Panel = dict[str, Any]


def _target(expr: str, legend: str, ref: str) -> dict[str, Any]:
    return {
        "datasource": {"type": "prometheus", "uid": "${datasource}"},
        "expr": expr,
        "legendFormat": legend,
        "refId": ref,
    }


def timeseries(
    title: str, unit: str, targets: list[tuple[str, str]], description: str = "", max_: float | None = None
) -> Panel:
    defaults: dict[str, Any] = {"unit": unit, "min": 0}
    if max_ is not None:
        defaults["max"] = max_
    return {
        "type": "timeseries",
        "title": title,
        "description": description,
        "datasource": {"type": "prometheus", "uid": "${datasource}"},
        "fieldConfig": {"defaults": defaults, "overrides": []},
        "options": {"legend": {"displayMode": "list", "placement": "bottom"}, "tooltip": {"mode": "multi"}},
        "targets": [_target(expr, legend, chr(ord("A") + i)) for i, (expr, legend) in enumerate(targets)],
    }


def stat(title: str, unit: str, expr: str, description: str = "") -> Panel:
    return {
        "type": "stat",
        "title": title,
        "description": description,
        "datasource": {"type": "prometheus", "uid": "${datasource}"},
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "options": {"reduceOptions": {"calcs": ["lastNotNull"]}, "colorMode": "value"},
        "targets": [_target(expr, "", "A")],
    }


def quantiles(metric: str, by: str, qs: tuple[float, ...]) -> list[tuple[str, str]]:
    return [
        (
            f"histogram_quantile({q}, sum by ({by}le) (rate({metric}_bucket{{{QUEUE}}}[$__rate_interval])))",
            f"p{round(q * 100)}" + (" {{job_type}}" if "job_type" in by else ""),
        )
        for q in qs
    ]


def panels() -> list[Panel]:
    """Rows of panels, top to bottom: is work waiting, is it moving, how fast, how it ends, the fleet."""
    rows: list[list[Panel]] = [
        [
            stat("Ready jobs", "short", f"sum(pgwork_queue_ready_jobs{{{QUEUE}}})"),
            stat("Oldest wait", "s", f"max(pgwork_queue_oldest_wait_seconds{{{QUEUE}}})"),
            stat("Running", "short", f"sum(pgwork_queue_running_jobs{{{QUEUE}}})"),
            stat("Dead", "short", f"sum(pgwork_queue_dead_jobs{{{QUEUE}}})"),
            stat("Database up", "bool", f"min(pgwork_queue_database_up{{{QUEUE}}})"),
        ],
        [
            timeseries(
                "Backlog: ready and scheduled",
                "short",
                [
                    (f"pgwork_queue_ready_jobs{{{QUEUE}}}", "ready {{namespace}}/{{jobqueue}}"),
                    (f"pgwork_queue_scheduled_jobs{{{QUEUE}}}", "scheduled {{namespace}}/{{jobqueue}}"),
                ],
                "Ready: claimable now. Scheduled: waiting for available_at (delays and retry backoff).",
            ),
            timeseries(
                "Oldest ready job wait",
                "s",
                [(f"pgwork_queue_oldest_wait_seconds{{{QUEUE}}}", "{{namespace}}/{{jobqueue}}")],
                "How long the oldest claimable job has waited. PgworkBacklogAgeHigh fires above 10m.",
            ),
        ],
        [
            timeseries(
                "Running jobs",
                "short",
                [
                    (f"pgwork_queue_running_jobs{{{QUEUE}}}", "running {{namespace}}/{{jobqueue}}"),
                    (f"sum by (namespace, jobqueue) (pgwork_jobs_in_flight{{{QUEUE}}})", "in flight (workers)"),
                ],
            ),
            timeseries(
                "Max time since heartbeat",
                "s",
                [
                    (f"pgwork_queue_max_heartbeat_age_seconds{{{QUEUE}}}", "{{namespace}}/{{jobqueue}}"),
                    (f"3 * pgwork_queue_heartbeat_interval_seconds{{{QUEUE}}}", "alert threshold (3x interval)"),
                ],
                "Oldest heartbeat among running jobs. Above three intervals, PgworkHeartbeatStale fires.",
            ),
            timeseries(
                "Worker heartbeat age",
                "s",
                [
                    (f"pgwork_worker_heartbeat_age_seconds{{{QUEUE}}}", "{{pod}}"),
                    (
                        f"3 * max by (namespace, jobqueue) (pgwork_worker_heartbeat_interval_seconds{{{QUEUE}}})",
                        "alert threshold (3x interval)",
                    ),
                ],
                "Each worker's own view: seconds since its least recently renewed lease was claimed or renewed. "
                "Above three intervals, PgworkWorkerHeartbeatStale fires (so does a worker that stops answering "
                "scrapes while it holds jobs: its line then ends).",
            ),
        ],
        [
            timeseries(
                "Claim latency",
                "s",
                quantiles("pgwork_claim_duration_seconds", "", (0.5, 0.95, 0.99)),
                "Time for one claim statement, measured by workers.",
            ),
            timeseries(
                "Job duration by type",
                "s",
                quantiles("pgwork_job_duration_seconds", "job_type, ", (0.5, 0.95, 0.99)),
            ),
        ],
        [
            timeseries(
                "Outcomes per second",
                "ops",
                [
                    (
                        f"sum by (outcome) (rate(pgwork_jobs_finished_total{{{QUEUE}}}[$__rate_interval]))",
                        "{{outcome}}",
                    ),
                    (
                        f"sum(rate(pgwork_lease_lost_total{{{QUEUE}}}[$__rate_interval]))",
                        "lease lost",
                    ),
                ],
            ),
            timeseries(
                "Dead jobs",
                "short",
                [(f"pgwork_queue_dead_jobs{{{QUEUE}}}", "{{namespace}}/{{jobqueue}}")],
                "Jobs that used up their attempts; see `pgwork dead` and `pgwork retry`.",
            ),
        ],
        [
            timeseries(
                "Timeouts and abandoned handlers per hour, by type",
                "short",
                [
                    (
                        f"3600 * sum by (job_type) (rate(pgwork_jobs_timed_out_total{{{QUEUE}}}[$__rate_interval]))",
                        "timed out {{job_type}}",
                    ),
                    (
                        f"3600 * sum by (job_type) (rate(pgwork_jobs_abandoned_total{{{QUEUE}}}[$__rate_interval]))",
                        "abandoned {{job_type}}",
                    ),
                ],
                "Attempts that passed their hard timeout, and those whose handler then ignored the stop (their "
                "thread abandoned). PgworkJobsTimingOut fires at three timeouts of a type in 30 minutes.",
            ),
            timeseries(
                "Abandoned handler threads per worker",
                "short",
                [(f"pgwork_worker_abandoned_threads{{{QUEUE}}}", "{{namespace}}/{{pod}}")],
                "Threads a worker gave up on that still run (memory, CPU, a GPU). Past --max-abandoned "
                "(spec.worker.maxAbandoned, default 3) the worker drains and exits 3 for a restart; "
                "PgworkWorkerAbandonedThreads fires while one stays above 0 for 5 minutes.",
            ),
            timeseries(
                "Mean progress of reporting jobs, by type",
                "percentunit",
                [
                    (
                        f"sum by (job_type) (pgwork_job_progress_sum{{{QUEUE}}})"
                        f" / (sum by (job_type) (pgwork_job_progress_reporting{{{QUEUE}}}) > 0)",
                        "{{job_type}}",
                    ),
                ],
                "Mean job.progress of the running jobs that reported one (jobs that never report are not "
                "counted; no line while none does). A flat line for long means stuck jobs: see "
                "`pgwork running` (since_progress_seconds) and PgworkProgressStalled.",
                max_=1,
            ),
        ],
        [
            timeseries(
                "Workers: desired vs current replicas",
                "short",
                [
                    (f"pgwork_queue_desired_replicas{{{QUEUE}}}", "desired {{namespace}}/{{jobqueue}}"),
                    (f"pgwork_queue_current_replicas{{{QUEUE}}}", "current {{namespace}}/{{jobqueue}}"),
                ],
            ),
        ],
    ]
    laid_out: list[Panel] = []
    y = 0
    for row in rows:
        width = WIDTH // len(row)
        height = 4 if all(p["type"] == "stat" for p in row) else HEIGHT
        for i, panel in enumerate(row):
            laid_out.append(
                {**panel, "id": len(laid_out) + 1, "gridPos": {"x": i * width, "y": y, "w": width, "h": height}}
            )
        y += height
    return laid_out


def _query_variable(name: str, label: str, query: str) -> dict[str, Any]:
    return {
        "name": name,
        "label": label,
        "type": "query",
        "datasource": {"type": "prometheus", "uid": "${datasource}"},
        # Grafana's own exports add "definition" (the query as text, for its editor); the dashboard
        # schema (@grafana/schema VariableModel) has no such field and Grafana reads `query`.
        "query": {"query": query, "refId": name},
        "refresh": 2,
        "includeAll": True,
        "multi": True,
        "allValue": ".*",
        "current": {"selected": True, "text": ["All"], "value": ["$__all"]},
        "sort": 1,
    }


def dashboard() -> dict[str, Any]:
    return {
        "uid": UID,
        "title": TITLE,
        "description": "pgwork queues: backlog, heartbeats, claim latency, outcomes, timeouts, progress and worker "
        "replicas.",
        "tags": ["pgwork"],
        "editable": True,
        "schemaVersion": 39,
        "version": 1,
        "time": {"from": "now-6h", "to": "now"},
        "refresh": "30s",
        "timezone": "browser",
        "graphTooltip": 1,
        "links": [],
        "annotations": {"list": []},
        "templating": {
            "list": [
                {
                    "name": "datasource",
                    "label": "Data source",
                    "type": "datasource",
                    "query": "prometheus",
                    # No `current`: Grafana selects the default Prometheus data source (an empty
                    # `current` is not a VariableOption, which needs text and value).
                },
                _query_variable("namespace", "Namespace", "label_values(pgwork_queue_ready_jobs, namespace)"),
                _query_variable(
                    "jobqueue",
                    "JobQueue",
                    'label_values(pgwork_queue_ready_jobs{namespace=~"$namespace"}, jobqueue)',
                ),
            ]
        },
        "panels": panels(),
    }


def render() -> str:
    return json.dumps(dashboard(), indent=2, sort_keys=True) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true", help="fail if the committed JSON differs")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        if not OUTPUT.exists() or OUTPUT.read_text() != text:
            print(f"{OUTPUT.relative_to(ROOT)} is stale: run python scripts/build_dashboard.py", file=sys.stderr)
            return 1
        return 0
    OUTPUT.write_text(text)
    print(f"wrote {OUTPUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
