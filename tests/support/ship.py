"""For the ship tests: find the real tools, run helm, load YAML, read the metrics contract."""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "pgwork"
MONITORING = ROOT / "monitoring"
# Kubernetes minor versions the chart and manifests promise to work on (Chart.yaml kubeVersion >=1.30).
KUBERNETES_VERSIONS = ("1.30.0", "1.33.0", "1.35.0")


def tool(name: str) -> str | None:
    local = ROOT / "tools" / "bin" / name
    if local.is_file() and os.access(local, os.X_OK):
        return str(local)
    return shutil.which(name)


def require(name: str) -> str:
    path = tool(name)
    if path is None:
        pytest.skip(f"{name} is not installed (not on PATH, not in tools/bin): run .ci/install-tools.sh")
    return path


def run(cmd: list[str], cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=120, check=False)


@functools.cache
def _helm_template_cached(args: tuple[str, ...]) -> tuple[int, str, str]:
    proc = run([require("helm"), "template", "pgwork", str(CHART), "--namespace", "pgwork", *args])
    return proc.returncode, proc.stdout, proc.stderr


def helm_template(*args: str) -> list[dict[str, Any]]:
    """Rendered objects; fails the test with helm's message when rendering fails."""
    code, out, err = _helm_template_cached(args)
    assert code == 0, f"helm template {' '.join(args)} failed:\n{err}"
    return [d for d in yaml.safe_load_all(out) if d]


def helm_template_error(*args: str) -> str:
    code, _, err = _helm_template_cached(args)
    assert code != 0, f"helm template {' '.join(args)} succeeded but should have been refused"
    return err


def ci_values() -> list[Path]:
    return sorted((CHART / "ci").glob("*-values.yaml"))


def contract_metrics() -> set[str]:
    """Metric names promised in docs/architecture.md (the contract between the parts)."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    section = text[text.index("## Metrics") :]
    return set(re.findall(r"`(pgwork_[a-z_]+)", section))


HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")


def metrics_in(expr: str) -> set[str]:
    """pgwork_* metric names an expression reads, histogram series mapped to their family."""
    names = set()
    for found in re.findall(r"\bpgwork_[a-z_]+", expr):
        family = found
        for suffix in HISTOGRAM_SUFFIXES:
            if found.endswith(suffix) and found.removesuffix(suffix).endswith("_seconds"):
                family = found.removesuffix(suffix)
        names.add(family)
    return names


def load_yaml(path: Path) -> Any:
    return yaml.safe_load(path.read_text())
