"""Chart copies, plain manifests and the JobQueue reference page stay equal to their sources."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from tests.support.scripts import load_script
from tests.support.ship import CHART, KUBERNETES_VERSIONS, ROOT, load_yaml, require

sync_chart = load_script("sync_chart")
reference = load_script("gen_jobqueue_reference")

MANIFESTS = ROOT / "manifests"


# ---------------------------------------------------------------- pure parts


@pytest.mark.parametrize(
    ("rules", "cluster", "namespaced"),
    [
        (
            [{"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["get"]}],
            [],
            [{"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["get"]}],
        ),
        (
            [{"apiGroups": [""], "resources": ["namespaces"], "verbs": ["list"]}],
            [{"apiGroups": [""], "resources": ["namespaces"], "verbs": ["list"]}],
            [],
        ),
        (
            [{"apiGroups": ["kopf.dev"], "resources": ["clusterkopfpeerings", "kopfpeerings"], "verbs": ["get"]}],
            [{"apiGroups": ["kopf.dev"], "resources": ["clusterkopfpeerings"], "verbs": ["get"]}],
            [{"apiGroups": ["kopf.dev"], "resources": ["kopfpeerings"], "verbs": ["get"]}],
        ),
        (
            [{"apiGroups": ["pgwork.dev"], "resources": ["jobqueues/status"], "verbs": ["patch"]}],
            [],
            [{"apiGroups": ["pgwork.dev"], "resources": ["jobqueues/status"], "verbs": ["patch"]}],
        ),
        (
            [{"nonResourceURLs": ["/healthz"], "verbs": ["get"]}],
            [{"nonResourceURLs": ["/healthz"], "verbs": ["get"]}],
            [],
        ),
    ],
    ids=["namespaced", "cluster", "mixed-split", "subresource", "non-resource"],
)
def test_split_rules(rules: list[dict[str, Any]], cluster: list[Any], namespaced: list[Any]) -> None:
    assert sync_chart.split_rules(rules) == (cluster, namespaced)


def test_split_rules_refuses_a_rule_without_resources() -> None:
    with pytest.raises(sync_chart.SyncError, match=r"rules\[0\] has no resources"):
        sync_chart.split_rules([{"apiGroups": [""], "verbs": ["get"]}])


def test_rbac_chart_file_refuses_a_file_without_rules() -> None:
    with pytest.raises(sync_chart.SyncError, match="expected a mapping with a `rules:` list"):
        sync_chart.rbac_chart_file("kind: ClusterRole\n")


def test_split_manifests_orders_files_and_relabels() -> None:
    rendered = """
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: a, labels: {helm.sh/chart: x-1, app.kubernetes.io/managed-by: Helm}}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: b}
"""
    files = sync_chart.split_manifests(rendered, "ns")
    assert list(files) == ["00-crd.yaml", "01-namespace.yaml", "10-operator.yaml"]
    (account,) = [d for d in yaml.safe_load_all(files["10-operator.yaml"]) if d]
    assert account["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "kubectl"}
    (namespace,) = [d for d in yaml.safe_load_all(files["01-namespace.yaml"]) if d]
    assert namespace["metadata"]["name"] == "ns"


def test_drift_reports_changed_and_missing_files(tmp_path: Path) -> None:
    same = tmp_path / "same.yaml"
    same.write_text("a\n")
    changed = tmp_path / "changed.yaml"
    changed.write_text("old\n")
    gone = tmp_path / "gone.yaml"
    monkey_root = sync_chart.ROOT
    sync_chart.ROOT = tmp_path
    try:
        assert sync_chart.drift({same: "a\n", changed: "new\n", gone: "x\n"}) == ["changed.yaml", "gone.yaml"]
    finally:
        sync_chart.ROOT = monkey_root


# ---------------------------------------------------------------- drift against the repository


def test_chart_copies_equal_their_sources() -> None:
    for path, text in sync_chart.chart_files().items():
        assert path.read_text() == text, f"{path.relative_to(ROOT)} drifted: run python scripts/sync_chart.py"


def test_crd_copy_is_verbatim() -> None:
    assert (CHART / "crds" / "jobqueues.pgwork.dev.yaml").read_bytes() == (
        ROOT / "pgwork" / "operator" / "crd.yaml"
    ).read_bytes()


def test_manifests_are_rendered_from_the_chart() -> None:
    require("helm")
    expected = sync_chart.manifest_files()
    assert sync_chart.drift(expected) == [], "manifests/ drifted: run python scripts/sync_chart.py"
    assert sync_chart.stale_manifests(expected) == []


def test_jobqueue_reference_is_generated_from_the_crd() -> None:
    assert reference.main(["--check"]) == 0, "run python scripts/gen_jobqueue_reference.py"


def test_reference_lists_every_spec_field() -> None:
    crd = load_yaml(ROOT / "pgwork" / "operator" / "crd.yaml")
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    page = (ROOT / "docs" / "jobqueue-reference.md").read_text()
    for name in spec["properties"]:
        assert f"`spec.{name}`" in page


# ---------------------------------------------------------------- the plain manifests themselves


def manifest_objects() -> list[tuple[str, dict[str, Any]]]:
    return [
        (str(path.relative_to(ROOT)), doc)
        for path in sorted(MANIFESTS.rglob("*.yaml"))
        for doc in yaml.safe_load_all(path.read_text())
        if doc
    ]


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_manifests_are_valid_kubernetes(version: str) -> None:
    crd_schema = load_yaml(ROOT / "pgwork" / "operator" / "crd.yaml")["spec"]["versions"][0]["schema"]
    for where, obj in manifest_objects():
        if obj["kind"] == "JobQueue":
            jsonschema.Draft7Validator(crd_schema["openAPIV3Schema"]).validate(obj)
            continue
        try:
            kubernetes_validate.validate(obj, version, strict=True)
        except kubernetes_validate.ValidationError as exc:
            pytest.fail(f"{where}: {obj['kind']}/{obj['metadata']['name']} invalid for {version}: {exc}")


def test_manifests_apply_in_order_without_helm_traces() -> None:
    top = sorted(p.name for p in MANIFESTS.glob("*.yaml"))
    assert top == ["00-crd.yaml", "01-namespace.yaml", "10-operator.yaml"]
    kinds = [obj["kind"] for _, obj in manifest_objects()]
    assert kinds.index("Namespace") < kinds.index("Deployment")
    for where, obj in manifest_objects():
        labels = obj["metadata"].get("labels", {})
        assert "helm.sh/chart" not in labels, where
        assert labels.get("app.kubernetes.io/managed-by") != "Helm", where
    operator = [obj for _, obj in manifest_objects() if obj["kind"] == "Deployment"]
    assert operator[0]["metadata"]["namespace"] == "pgwork"


def test_example_jobqueue_is_outside_the_apply_directory() -> None:
    """`kubectl apply -f manifests/` must not race the CRD with a JobQueue (not yet established)."""
    top_kinds = {obj["kind"] for where, obj in manifest_objects() if "/examples/" not in where}
    assert "JobQueue" not in top_kinds
    example = yaml.safe_load((MANIFESTS / "examples" / "jobqueue.yaml").read_text())
    assert example["kind"] == "JobQueue"
    assert "namespace" not in example["metadata"]
