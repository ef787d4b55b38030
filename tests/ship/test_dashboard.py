"""Grafana dashboard: generated, stable uid, every panel asked for, PromQL that promtool parses."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.ship.support import MONITORING, contract_metrics, load_script, metrics_in, require, run

build_dashboard = load_script("build_dashboard")

DASHBOARD = MONITORING / "grafana" / "pgwork-dashboard.json"


def committed() -> dict[str, Any]:
    return json.loads(DASHBOARD.read_text())


def exprs(dashboard: dict[str, Any]) -> list[str]:
    return [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]


def test_committed_json_matches_the_generator() -> None:
    assert build_dashboard.main(["--check"]) == 0, "run python scripts/build_dashboard.py"


def test_uid_is_stable() -> None:
    assert committed()["uid"] == "pgwork-overview"


@pytest.mark.parametrize(
    ("what", "needle"),
    [
        ("backlog ready", "pgwork_queue_ready_jobs"),
        ("oldest wait", "pgwork_queue_oldest_wait_seconds"),
        ("running", "pgwork_queue_running_jobs"),
        ("max since-heartbeat", "pgwork_queue_max_heartbeat_age_seconds"),
        ("claim latency p50", "histogram_quantile(0.5, sum by (le) (rate(pgwork_claim_duration_seconds_bucket"),
        ("claim latency p95", "histogram_quantile(0.95, sum by (le) (rate(pgwork_claim_duration_seconds_bucket"),
        ("claim latency p99", "histogram_quantile(0.99, sum by (le) (rate(pgwork_claim_duration_seconds_bucket"),
        ("job duration", "pgwork_job_duration_seconds_bucket"),
        ("outcome rates", "sum by (outcome) (rate(pgwork_jobs_finished_total"),
        ("dead count", "pgwork_queue_dead_jobs"),
        ("desired replicas", "pgwork_queue_desired_replicas"),
        ("current replicas", "pgwork_queue_current_replicas"),
    ],
)
def test_dashboard_shows(what: str, needle: str) -> None:
    assert any(needle in e for e in exprs(committed())), f"no panel shows {what}"


def test_every_query_uses_contract_metrics_and_the_queue_filter() -> None:
    for expr in exprs(committed()):
        assert metrics_in(expr) <= contract_metrics(), expr
        assert 'namespace=~"$namespace", jobqueue=~"$jobqueue"' in expr, expr


def test_panels_have_unique_ids_and_do_not_overlap() -> None:
    panels = committed()["panels"]
    assert len({p["id"] for p in panels}) == len(panels)
    cells: set[tuple[int, int]] = set()
    for p in panels:
        g = p["gridPos"]
        assert g["x"] + g["w"] <= 24
        own = {(x, y) for x in range(g["x"], g["x"] + g["w"]) for y in range(g["y"], g["y"] + g["h"])}
        assert not cells & own, f"panel {p['title']!r} overlaps another"
        cells |= own


def test_variables_chain_namespace_then_jobqueue() -> None:
    variables = {v["name"]: v for v in committed()["templating"]["list"]}
    assert variables["datasource"]["query"] == "prometheus"
    assert "$namespace" in variables["jobqueue"]["definition"]


def test_every_query_parses_with_promtool(tmp_path: Path) -> None:
    """Grafana variables replaced by literal values, each query checked as a recording rule."""
    promtool = require("promtool")
    substitutions = {"$__rate_interval": "5m", "$namespace": ".*", "$jobqueue": ".*"}
    rules = []
    for i, query in enumerate(exprs(committed())):
        expr = query
        for var, value in substitutions.items():
            expr = expr.replace(var, value)
        assert "$" not in expr, f"unhandled Grafana variable in {expr}"
        rules.append({"record": f"pgwork:dashboard_query_{i}", "expr": expr})
    path = tmp_path / "dashboard-queries.yaml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    proc = run([promtool, "check", "rules", str(path)])
    assert proc.returncode == 0, proc.stdout + proc.stderr
