"""The alert expressions evaluated by promtool over series taken from the operator's real metrics
registry: the names and labels the alerts expect are the ones the operator exports."""

from __future__ import annotations

from pathlib import Path

import yaml
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from pgwork.horizon import HorizonFigures
from pgwork.operator.db import QueueBacklog
from pgwork.operator.metrics import OperatorMetrics
from tests.support.ship import MONITORING, contract_metrics, load_yaml, require, run

RULES = MONITORING / "prometheus" / "pgwork-alerts.yaml"


def figures(*, ready: int, dead: int, heartbeat_age: float) -> QueueBacklog:
    return QueueBacklog(
        ready=ready,
        scheduled=0,
        retrying=0,
        running=1,
        dead=dead,
        oldest_wait_seconds=0.0,
        max_heartbeat_age_seconds=heartbeat_age,
    )


def exposition() -> str:
    metrics = OperatorMetrics()
    metrics.record(
        "ocr", "stuck", figures(ready=4, dead=0, heartbeat_age=45.0), desired=0, current=0, heartbeat_seconds=10.0
    )
    metrics.record(
        "ocr", "healthy", figures(ready=4, dead=0, heartbeat_age=5.0), desired=2, current=2, heartbeat_seconds=10.0
    )
    metrics.record("ocr", "unreachable", None, desired=None, current=3, heartbeat_seconds=10.0)
    metrics.record_horizon("ocr", "stuck", HorizonFigures(900.0, True, 12345, None, 60000, True, True))
    metrics.record_horizon("ocr", "healthy", HorizonFigures(2.0, True, 3, None, 10, True, True))
    return generate_latest(metrics.registry).decode()


def series() -> list[dict[str, str]]:
    rows = []
    for family in text_string_to_metric_families(exposition()):
        for sample in family.samples:
            labels = ",".join(f'{k}="{v}"' for k, v in sorted(sample.labels.items()))
            rows.append({"series": f"{sample.name}{{{labels}}}", "values": f"{sample.value:g}x20"})
    return rows


def alert_expr(name: str) -> str:
    rules = [r for g in load_yaml(RULES)["groups"] for r in g["rules"]]
    return str(next(r["expr"] for r in rules if r.get("alert") == name))


PER_DATABASE = {"pgwork_jobs_without_consumer"}


def test_operator_exports_exactly_the_contract_gauges() -> None:
    names = {family.name for family in text_string_to_metric_families(exposition())}
    # The operator's per-JobQueue families: the queue's figures and its database's vacuum horizon (issue 23).
    operator_prefixes = ("pgwork_queue_", "pgwork_vacuum_", "pgwork_jobs_dead_", "pgwork_jobs_autovacuum_")
    queue_contract = {m for m in contract_metrics() if m.startswith(operator_prefixes)}
    # Per-database gauges (docs/architecture.md, "Per database") are the operator's too.
    assert names - PER_DATABASE == queue_contract
    assert contract_metrics() >= PER_DATABASE
    for family in text_string_to_metric_families(exposition()):
        # Every series names its JobQueue, or its database and job type; the lower-bound gauge also
        # says which figure was capped.
        if family.name in PER_DATABASE:
            expected = {"database", "job_type"}
        else:
            expected = {"namespace", "jobqueue"} | (
                {"figure"} if family.name == "pgwork_queue_count_lower_bound" else set()
            )
        for sample in family.samples:
            assert set(sample.labels) == expected


def test_promtool_accepts_the_exposition(tmp_path: Path) -> None:
    path = tmp_path / "metrics.txt"
    path.write_text(exposition())
    proc = run(["sh", "-c", f"{require('promtool')} check metrics < {path}"])
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_alert_expressions_select_the_right_queues_from_real_series(tmp_path: Path) -> None:
    checks = [
        # (alert, expected (jobqueue, value) rows)
        ("PgworkHeartbeatStale", [("stuck", 45.0)]),
        ("PgworkBacklogWithoutWorkers", [("stuck", 4.0)]),
        ("PgworkQueueDatabaseDown", [("unreachable", 0.0)]),
        ("PgworkVacuumHorizonHeld", [("stuck", 900.0)]),
    ]
    tests = {
        "rule_files": [str(RULES)],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": series(),
                "promql_expr_test": [
                    {
                        "expr": alert_expr(alert),
                        "eval_time": "5m",
                        "exp_samples": [
                            {"labels": f'{{jobqueue="{queue}",namespace="ocr"}}', "value": value}
                            for queue, value in rows
                        ],
                    }
                    for alert, rows in checks
                ],
            }
        ],
    }
    path = tmp_path / "real-series.test.yaml"
    path.write_text(yaml.safe_dump(tests, sort_keys=False))
    proc = run([require("promtool"), "test", "rules", str(path)])
    assert proc.returncode == 0, proc.stdout + proc.stderr
