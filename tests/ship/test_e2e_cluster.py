"""On a real cluster (KUBECONFIG given): the API server itself accepts the manifests and the chart.
Server-side dry runs only: nothing is created."""

from __future__ import annotations

import os

import pytest

from tests.support.ship import CHART, ROOT, require, run

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def kubectl() -> str:
    if not os.environ.get("KUBECONFIG"):
        pytest.skip("no cluster: set KUBECONFIG to run the e2e checks")
    path = require("kubectl")
    proc = run([path, "version", "--request-timeout=5s"])
    if proc.returncode != 0:
        pytest.skip(f"cluster in KUBECONFIG does not answer: {proc.stderr.strip()[:200]}")
    return path


def test_server_accepts_the_crds(kubectl: str) -> None:
    proc = run([kubectl, "apply", "--dry-run=server", "--server-side", "-f", str(ROOT / "manifests" / "00-crd.yaml")])
    assert proc.returncode == 0, proc.stderr


def test_server_accepts_the_chart(kubectl: str) -> None:
    proc = run([require("helm"), "install", "pgwork-e2e", str(CHART), "--namespace", "default", "--dry-run=server"])
    assert proc.returncode == 0, proc.stderr
