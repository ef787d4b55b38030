"""Grafana dashboard: generated, stable uid, every panel asked for, PromQL that promtool parses."""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.scripts import load_script
from tests.support.ship import MONITORING, contract_metrics, metrics_in, require, run

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
        ("timeouts per type", "sum by (job_type) (rate(pgwork_jobs_timed_out_total"),
        ("abandons per type", "sum by (job_type) (rate(pgwork_jobs_abandoned_total"),
        ("abandoned threads per worker", "pgwork_worker_abandoned_threads"),
        (
            "mean progress per type",
            "sum by (job_type) (pgwork_job_progress_sum{QUEUE}) / (sum by (job_type) (pgwork_job_progress_reporting",
        ),
    ],
)
def test_dashboard_shows(what: str, needle: str) -> None:
    needle = needle.replace("{QUEUE}", '{namespace=~"$namespace", jobqueue=~"$jobqueue"}')
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
    assert "$namespace" in variables["jobqueue"]["query"]["query"]


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


# -- the dashboard against Grafana's own schema (npm @grafana/schema, checked by TypeScript) --

GRAFANA_SCHEMA = "@grafana/schema@13.2.3"
TYPESCRIPT = "typescript@7.0.2"
# Outside the tree: node_modules is reused across sessions.
NODE_CACHE = Path(os.environ.get("PGWORK_NODE_CACHE", "/var/tmp/pgwork-grafana-schema"))


@pytest.fixture(scope="module")
def schema_checker() -> Path:
    npm, node = shutil.which("npm"), shutil.which("node")
    if npm is None or node is None:
        pytest.skip("node/npm are not installed: the Grafana schema check needs npm @grafana/schema and typescript")
    NODE_CACHE.mkdir(parents=True, exist_ok=True)
    installed = NODE_CACHE / "node_modules" / "@grafana" / "schema" / "package.json"
    tsc = NODE_CACHE / "node_modules" / ".bin" / "tsc"
    wanted = GRAFANA_SCHEMA.rsplit("@", 1)[1]
    if not (installed.exists() and json.loads(installed.read_text())["version"] == wanted and tsc.exists()):
        package = NODE_CACHE / "package.json"
        if not package.exists():
            package.write_text('{"name": "pgwork-grafana-schema-check", "private": true}\n')
        proc = subprocess.run(
            [npm, "install", "--silent", "--no-audit", "--no-fund", GRAFANA_SCHEMA, TYPESCRIPT],
            cwd=NODE_CACHE, capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
        if proc.returncode != 0:
            pytest.skip(f"npm install {GRAFANA_SCHEMA} {TYPESCRIPT} failed: {proc.stderr.strip()[-300:]}")
    return tsc


def schema_errors(tsc: Path, dashboard: dict[str, Any]) -> tuple[int, str]:
    """tsc's verdict on `<dashboard JSON> satisfies Dashboard` (excess-property checks included)."""
    source = NODE_CACHE / f"check-{uuid.uuid4().hex}.ts"
    source.write_text(
        'import type { Dashboard } from "@grafana/schema";\n'
        f"export const dashboard = ({json.dumps(dashboard, indent=1)}) satisfies Dashboard;\n"
    )
    try:
        proc = subprocess.run(
            [str(tsc), "--noEmit", "--strict", "--skipLibCheck", "--target", "es2022", "--module", "esnext",
             "--moduleResolution", "bundler", source.name],
            cwd=NODE_CACHE, capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
    finally:
        source.unlink()
    return proc.returncode, proc.stdout + proc.stderr


def test_dashboard_satisfies_the_grafana_schema(schema_checker: Path) -> None:
    code, out = schema_errors(schema_checker, committed())
    assert code == 0, out


def test_the_schema_check_reports_what_grafana_does_not_know(schema_checker: Path) -> None:
    """The check is sharp: the two faults it found in the first dashboard are reported."""
    broken = copy.deepcopy(committed())
    variables = broken["templating"]["list"]
    variables[0]["current"] = {}
    variables[1]["definition"] = variables[1]["query"]["query"]
    code, out = schema_errors(schema_checker, broken)
    assert code != 0
    assert "'VariableOption'" in out, out
    assert "'\"definition\"' does not exist in type 'VariableModel'" in out, out
