"""The Helm chart, rendered and checked by the real tools: helm lint/template, kubernetes-validate,
promtool for the wrapped rules, jsonschema (the CRD's own schema) for the example JobQueue."""

from __future__ import annotations

import argparse
import copy
import json
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from pgwork.operator import command, render
from tests.support.ship import (
    CHART,
    KUBERNETES_VERSIONS,
    MONITORING,
    ROOT,
    ci_values,
    helm_template,
    helm_template_error,
    load_yaml,
    require,
    run,
)

# Kinds from CRDs that kubernetes-validate has no schema for; each is checked by its own test below.
CUSTOM_KINDS = {"JobQueue", "ServiceMonitor", "PodMonitor", "PrometheusRule", "ClusterKopfPeering", "KopfPeering"}
STANDARD_LABELS = (
    "app.kubernetes.io/name",
    "app.kubernetes.io/instance",
    "app.kubernetes.io/version",
    "app.kubernetes.io/component",
    "app.kubernetes.io/part-of",
    "app.kubernetes.io/managed-by",
    "helm.sh/chart",
)


def values_id(path: Path) -> str:
    return path.name.removesuffix("-values.yaml")


def rendered(values: Path | None = None, *extra: str) -> list[dict[str, Any]]:
    args = ["--include-crds", *extra]
    if values is not None:
        args += ["-f", str(values)]
    return helm_template(*args)


def by_kind(objects: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objects if o["kind"] == kind]


def crd_schema() -> dict[str, Any]:
    crd = load_yaml(CHART / "crds" / "jobqueues.pgwork.dev.yaml")
    return dict(crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"])


# ---------------------------------------------------------------- helm lint


def test_ci_values_files_exist() -> None:
    assert {values_id(p) for p in ci_values()} >= {"default", "namespaced", "monitoring", "peering"}


@pytest.mark.parametrize("values", [None, *ci_values()], ids=lambda v: "chart-defaults" if v is None else values_id(v))
def test_helm_lint(values: Path | None) -> None:
    cmd = [require("helm"), "lint", str(CHART), "--strict"]
    if values is not None:
        cmd += ["-f", str(values)]
    proc = run(cmd)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0 chart(s) failed" in proc.stdout


# ---------------------------------------------------------------- Kubernetes schemas


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
@pytest.mark.parametrize("values", ci_values(), ids=values_id)
def test_every_object_is_valid_kubernetes(values: Path, version: str) -> None:
    objects = rendered(values)
    assert objects
    for obj in objects:
        if obj["kind"] in CUSTOM_KINDS:
            continue
        where = f"{obj['kind']}/{obj['metadata']['name']}"
        try:
            kubernetes_validate.validate(obj, version, strict=True)
        except kubernetes_validate.ValidationError as exc:
            pytest.fail(f"{where} is not valid for Kubernetes {version}: {exc}")


def test_the_schema_check_rejects_a_broken_object() -> None:
    """kubernetes-validate is wired so it can fail: a typo'd field and a wrong type are refused."""
    deployment = copy.deepcopy(by_kind(rendered(), "Deployment")[0])
    deployment["spec"]["replicas"] = "one"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, KUBERNETES_VERSIONS[-1], strict=True)
    deployment = copy.deepcopy(by_kind(rendered(), "Deployment")[0])
    deployment["spec"]["template"]["spec"]["containers"][0]["securityContxt"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, KUBERNETES_VERSIONS[-1], strict=True)


def test_kinds_rendered_by_default_and_optional_parts_off() -> None:
    kinds = sorted(o["kind"] for o in rendered())
    assert kinds == sorted(
        [
            "CustomResourceDefinition",
            "CustomResourceDefinition",
            "CustomResourceDefinition",
            "ServiceAccount",
            "ClusterRole",
            "ClusterRoleBinding",
            "Service",
            "Deployment",
        ]
    )


def test_everything_optional_renders_when_enabled() -> None:
    kinds = {o["kind"] for o in rendered(CHART / "ci" / "monitoring-values.yaml")}
    assert kinds >= {"ServiceMonitor", "PodMonitor", "PrometheusRule", "ConfigMap", "JobQueue"}


@pytest.mark.parametrize("values", ci_values(), ids=values_id)
def test_standard_labels_on_every_object(values: Path) -> None:
    for obj in rendered(values):
        if obj["kind"] == "CustomResourceDefinition":
            continue  # crds/ is copied verbatim, not templated
        labels = obj["metadata"].get("labels", {})
        missing = [k for k in STANDARD_LABELS if k not in labels]
        assert not missing, f"{obj['kind']}/{obj['metadata']['name']} lacks {missing}"
        assert labels["app.kubernetes.io/managed-by"] == "Helm"
        assert labels["app.kubernetes.io/instance"] == "pgwork"


# ---------------------------------------------------------------- hardening


@pytest.mark.parametrize("values", ci_values(), ids=values_id)
def test_pods_and_containers_are_hardened(values: Path) -> None:
    for deployment in by_kind(rendered(values), "Deployment"):
        pod = deployment["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert pod["securityContext"]["runAsUser"] > 0
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        for container in pod["containers"]:
            sc = container["securityContext"]
            assert sc["readOnlyRootFilesystem"] is True
            assert sc["allowPrivilegeEscalation"] is False
            assert sc["capabilities"]["drop"] == ["ALL"]
            assert "add" not in sc["capabilities"]
            assert sc["seccompProfile"] == {"type": "RuntimeDefault"}
            assert container["resources"]["requests"], "the scheduler needs requests"
            assert container["livenessProbe"] and container["readinessProbe"]
        mounts = {m["mountPath"] for c in pod["containers"] for m in c.get("volumeMounts", [])}
        assert "/tmp" in mounts, "read-only root filesystem needs a writable /tmp"


def test_default_image_is_the_release_image_without_a_registry_host() -> None:
    container = by_kind(rendered(), "Deployment")[0]["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == "pgwork/pgwork:0.1.0"
    assert container["args"][0] == "operator"


@pytest.mark.parametrize(
    ("values", "expected_args"),
    [
        ("default", ["--all-namespaces", "--metrics-port=8080", "--standalone"]),
        ("namespaced", ["--namespace", "pgwork", "--standalone"]),
        ("peering", ["--all-namespaces", "--peering=pgwork"]),
    ],
)
def test_operator_arguments_follow_scope_and_peering(values: str, expected_args: list[str]) -> None:
    deployment = by_kind(rendered(CHART / "ci" / f"{values}-values.yaml"), "Deployment")[0]
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    for arg in expected_args:
        assert arg in args
    if values == "peering":
        assert "--standalone" not in args
        assert deployment["spec"]["replicas"] == 2
        peering = by_kind(rendered(CHART / "ci" / f"{values}-values.yaml"), "ClusterKopfPeering")
        assert [p["metadata"]["name"] for p in peering] == ["pgwork"]
    else:
        assert deployment["spec"]["strategy"]["type"] == "Recreate"


def test_operator_arguments_are_accepted_by_the_pgwork_cli() -> None:
    """The chart's flags exist on `pgwork operator` (parse only; nothing connects)."""
    parser = argparse.ArgumentParser()
    command.register(parser.add_subparsers())
    for values in ("default", "namespaced", "peering"):
        deployment = by_kind(rendered(CHART / "ci" / f"{values}-values.yaml"), "Deployment")[0]
        args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
        parsed = parser.parse_args(args)
        assert parsed.metrics_port == "8080"  # a string, bounded by `pgwork operator` itself (one line naming it)


# ---------------------------------------------------------------- values.schema.json


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("operator.replicas=2", "at '/operator/replicas': maximum: got 2, want 1"),
        ("operator.replicas=-1", "at '/operator/replicas': minimum: got -1, want 0"),
        ("operator.scope=everywhere", "at '/operator/scope': value must be one of 'cluster', 'namespace'"),
        ("operator.replicaCount=1", "additional properties 'replicaCount' not allowed"),
        ("image.pullPolicy=Sometimes", "at '/image/pullPolicy'"),
        ("image.repository=", "at '/image/repository'"),
        ("securityContext.readOnlyRootFilesystem=false", "at '/securityContext/readOnlyRootFilesystem'"),
        ("securityContext.allowPrivilegeEscalation=true", "at '/securityContext/allowPrivilegeEscalation'"),
        ("podSecurityContext.runAsNonRoot=false", "at '/podSecurityContext/runAsNonRoot'"),
        ("podSecurityContext.seccompProfile.type=Unconfined", "at '/podSecurityContext/seccompProfile/type'"),
        ("metrics.port=70000", "at '/metrics/port': maximum: got 70,000, want 65,535"),
        ("metrics.serviceMonitor.interval=soon", "at '/metrics/serviceMonitor/interval'"),
        ("grafanaDashboard.labels.grafana_dashboard=1", "at '/grafanaDashboard/labels/grafana_dashboard'"),
        ("prometheusRule.runbookBaseUrl=docs.example.com", "at '/prometheusRule/runbookBaseUrl'"),
        ("exampleJobQueue.name=Not_A_Name", "at '/exampleJobQueue/name'"),
        # spec.worker's typed fields carry the CRD's rules (copied by scripts/sync_chart.py).
        ("exampleJobQueue.spec.worker.batch=0", "at '/exampleJobQueue/spec/worker/batch'"),
        ("exampleJobQueue.spec.worker.isolation=fork", "at '/exampleJobQueue/spec/worker/isolation'"),
        ("exampleJobQueue.spec.worker.batchWait=20", "at '/exampleJobQueue/spec/worker/batchWait'"),
        ("exampleJobQueue.spec.worker.shm.sizeLimit=lots", "at '/exampleJobQueue/spec/worker/shm/sizeLimit'"),
    ],
)
def test_values_schema_rejects_bad_values_naming_the_field(setting: str, message: str) -> None:
    err = helm_template_error("--set", setting)
    assert "values don't meet the specifications of the schema" in err
    assert message in err, err


def test_values_schema_allows_more_replicas_only_with_peering() -> None:
    objs = helm_template("--set", "operator.replicas=3", "--set", "operator.peering.enabled=true")
    assert by_kind(objs, "Deployment")[0]["spec"]["replicas"] == 3


def test_template_refuses_a_servicemonitor_without_its_service() -> None:
    err = helm_template_error("--set", "metrics.serviceMonitor.enabled=true", "--set", "metrics.service.enabled=false")
    assert "metrics.serviceMonitor.enabled needs metrics.service.enabled=true" in err


def test_schema_documents_every_default_value() -> None:
    schema = json.loads((CHART / "values.schema.json").read_text())
    values = load_yaml(CHART / "values.yaml")
    jsonschema.Draft202012Validator(schema).validate(values)
    assert set(values) <= set(schema["properties"])


# ---------------------------------------------------------------- CRD and example JobQueue


def test_crd_ships_in_crds_directory_not_templates() -> None:
    assert (CHART / "crds" / "jobqueues.pgwork.dev.yaml").is_file()
    names = {o["metadata"]["name"] for o in rendered() if o["kind"] == "CustomResourceDefinition"}
    assert names == {"jobqueues.pgwork.dev", "kopfpeerings.kopf.dev", "clusterkopfpeerings.kopf.dev"}
    assert not any("CustomResourceDefinition" in p.read_text() for p in (CHART / "templates").glob("*.yaml"))
    without = [o["kind"] for o in helm_template()]
    assert "CustomResourceDefinition" not in without, "helm template without --include-crds skips crds/"


def test_example_jobqueue_is_valid_against_the_crd_schema() -> None:
    queue = by_kind(rendered(CHART / "ci" / "monitoring-values.yaml"), "JobQueue")[0]
    jsonschema.Draft7Validator(crd_schema()).validate(queue)
    assert queue["apiVersion"] == "pgwork.dev/v1alpha1"


def test_crd_schema_check_rejects_a_bad_jobqueue() -> None:
    queue = by_kind(rendered(CHART / "ci" / "monitoring-values.yaml"), "JobQueue")[0]
    del queue["spec"]["jobTypes"]
    with pytest.raises(jsonschema.ValidationError, match="'jobTypes' is a required property"):
        jsonschema.Draft7Validator(crd_schema()).validate(queue)


# ---------------------------------------------------------------- monitoring objects


def test_prometheusrule_wraps_the_plain_rules_file_and_promtool_accepts_it(tmp_path: Path) -> None:
    rule = by_kind(rendered(CHART / "ci" / "monitoring-values.yaml"), "PrometheusRule")[0]
    assert rule["apiVersion"] == "monitoring.coreos.com/v1"
    assert rule["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    plain = load_yaml(MONITORING / "prometheus" / "pgwork-alerts.yaml")
    prefixed = json.loads(
        json.dumps(plain).replace('"docs/runbooks.md#', '"https://docs.example.com/pgwork/docs/runbooks.md#')
    )
    assert rule["spec"] == prefixed
    path = tmp_path / "from-chart.yaml"
    path.write_text(yaml.safe_dump(rule["spec"]))
    proc = run([require("promtool"), "check", "rules", str(path)])
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_dashboard_configmap_carries_the_dashboard_for_the_grafana_sidecar() -> None:
    cm = by_kind(rendered(CHART / "ci" / "monitoring-values.yaml"), "ConfigMap")[0]
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert cm["metadata"]["namespace"] == "monitoring"
    embedded = json.loads(cm["data"]["pgwork-dashboard.json"])
    assert embedded == json.loads((MONITORING / "grafana" / "pgwork-dashboard.json").read_text())


def test_servicemonitor_scrapes_the_operator_service() -> None:
    objects = rendered(CHART / "ci" / "monitoring-values.yaml")
    sm = by_kind(objects, "ServiceMonitor")[0]
    (service,) = [s for s in by_kind(objects, "Service") if s["metadata"]["name"].endswith("-metrics")]
    selector = sm["spec"]["selector"]["matchLabels"]
    assert selector.items() <= service["metadata"]["labels"].items()
    # The console's Service (on in these values) is not scraped: its labels name another component.
    others = [s for s in by_kind(objects, "Service") if s is not service]
    assert others and all(not selector.items() <= s["metadata"]["labels"].items() for s in others)
    port_names = {p["name"] for p in service["spec"]["ports"]}
    assert {e["port"] for e in sm["spec"]["endpoints"]} <= port_names
    assert sm["spec"]["namespaceSelector"]["matchNames"] == ["pgwork"]


def test_podmonitor_selects_the_worker_pods_the_operator_renders() -> None:
    """The PodMonitor's selector matches the labels the operator puts on worker pods."""
    body = {"metadata": {"name": "scans", "namespace": "jobs", "uid": "u1"}, **_example_spec()}
    deployment = render.render_all(body)[0]
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    ports = {p["name"] for c in deployment["spec"]["template"]["spec"]["containers"] for p in c.get("ports", [])}
    pm = by_kind(rendered(CHART / "ci" / "monitoring-values.yaml"), "PodMonitor")[0]
    assert pm["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    endpoint = pm["spec"]["podMetricsEndpoints"][0]
    assert endpoint["port"] in ports
    relabel = {r["targetLabel"]: r["sourceLabels"][0] for r in endpoint["relabelings"]}
    jobqueue_label = next(k for k, v in pod_labels.items() if v == "scans" and k.endswith("jobqueue"))
    expected = "__meta_kubernetes_pod_label_" + "".join(c if c.isalnum() else "_" for c in jobqueue_label)
    assert relabel["jobqueue"] == expected


def _example_spec() -> dict[str, Any]:
    return {"spec": copy.deepcopy(load_yaml(CHART / "values.yaml")["exampleJobQueue"]["spec"])}


def test_notes_render() -> None:
    proc = run([require("helm"), "install", "pgwork", str(CHART), "--dry-run=client", "--namespace", "pgwork"])
    assert proc.returncode == 0, proc.stderr
    assert "kubectl get crd jobqueues.pgwork.dev" in proc.stdout
    assert "kubectl apply -f charts/pgwork/crds/" in proc.stdout


def test_chart_metadata() -> None:
    chart = load_yaml(CHART / "Chart.yaml")
    assert chart["apiVersion"] == "v2"
    assert chart["appVersion"] == load_yaml(ROOT / "charts" / "pgwork" / "Chart.yaml")["version"]
    assert chart["kubeVersion"].startswith(">=1.30")


def test_namespaced_peering_uses_a_namespaced_peering_object() -> None:
    objects = helm_template(
        "-f", str(CHART / "ci" / "namespaced-values.yaml"), "--set", "operator.peering.enabled=true"
    )
    (peering,) = by_kind(objects, "KopfPeering")
    assert peering["metadata"] == {**peering["metadata"], "name": "pgwork", "namespace": "pgwork"}
    assert not by_kind(objects, "ClusterKopfPeering")
    (role,) = by_kind(objects, "Role")
    assert any("kopfpeerings" in rule["resources"] for rule in role["rules"])


@pytest.mark.parametrize(("kube_version", "accepted"), [("1.29.0", False), ("1.30.0", True), ("1.35.0", True)])
def test_kube_version_constraint(kube_version: str, accepted: bool) -> None:
    proc = run([require("helm"), "template", "pgwork", str(CHART), "--kube-version", kube_version])
    assert (proc.returncode == 0) is accepted, proc.stderr
    if not accepted:
        assert "incompatible with Kubernetes" in proc.stderr


def test_dashboard_configmap_fits_the_size_limit() -> None:
    cm = by_kind(rendered(CHART / "ci" / "monitoring-values.yaml"), "ConfigMap")[0]
    assert len(json.dumps(cm)) < 900_000, "ConfigMaps hold at most 1 MiB"


# ---------------------------------------------------------------- where the operator may read Secrets


def _rbac_objects(*args: str) -> list[dict[str, Any]]:
    return [
        o for o in helm_template(*args) if o["kind"] in {"Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"}
    ]


def test_cluster_scope_by_default_reads_secrets_in_every_namespace() -> None:
    """What docs/install.md says cluster-wide mode grants: `get secrets` cluster-wide (never list/watch)."""
    from tests.support.rbac import allows

    (cluster_role,) = by_kind(_rbac_objects(), "ClusterRole")
    assert allows(cluster_role["rules"], "get", "", "secrets")
    assert not allows(cluster_role["rules"], "list", "", "secrets")
    assert not allows(cluster_role["rules"], "watch", "", "secrets")
    assert by_kind(_rbac_objects(), "Role") == []


def test_secret_access_can_be_limited_to_the_listed_namespaces() -> None:
    from pgwork.operator.permissions import required_permissions
    from tests.support.rbac import allows, expand

    objects = _rbac_objects("-f", str(CHART / "ci" / "secret-namespaces-values.yaml"))
    (cluster_role,) = by_kind(objects, "ClusterRole")
    assert not allows(cluster_role["rules"], "get", "", "secrets")
    roles = by_kind(objects, "Role")
    assert sorted(r["metadata"]["namespace"] for r in roles) == ["team-a", "team-b"]
    for role in roles:
        assert expand(role["rules"]) == {("get", "", "secrets")}
    bindings = by_kind(objects, "RoleBinding")
    assert sorted(b["metadata"]["namespace"] for b in bindings) == ["team-a", "team-b"]
    (cluster_binding,) = by_kind(objects, "ClusterRoleBinding")
    for binding in bindings:
        assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "pgwork-secrets"}
        assert binding["subjects"] == cluster_binding["subjects"]
    # Nothing else the operator needs was lost on the way.
    granted = expand(cluster_role["rules"]) | expand(roles[0]["rules"])
    assert {(verb, group, resource) for group, resource, verb in required_permissions()} == granted


def test_secret_namespaces_are_refused_with_namespace_scope() -> None:
    err = helm_template_error("--set", "operator.scope=namespace", "--set", "rbac.secretNamespaces={team-a}")
    assert "rbac.secretNamespaces is for operator.scope=cluster" in err


def test_values_schema_refuses_a_secret_namespace_that_is_no_namespace_name() -> None:
    err = helm_template_error("--set", "rbac.secretNamespaces={../kube-system}")
    assert "at '/rbac/secretNamespaces/0'" in err, err


def test_the_gpu_values_render_a_jobqueue_the_operator_turns_into_a_gpu_deployment() -> None:
    """ci/gpu-values.yaml: the typed worker fields through the chart, rendered by the operator beside
    its own flags, with the volumes, as a Deployment Kubernetes accepts."""
    (queue,) = by_kind(rendered(CHART / "ci" / "gpu-values.yaml"), "JobQueue")
    body = {"metadata": {"name": queue["metadata"]["name"], "namespace": "ml", "uid": "u"}, "spec": queue["spec"]}
    deployment = render.render_all(body, replicas=1)[0]
    kubernetes_validate.validate(deployment, "1.30", strict=True)
    pod = deployment["spec"]["template"]["spec"]
    args = pod["containers"][0]["args"]
    for flag in ("--batch", "--batch-wait", "--isolation", "--max-memory-per-child", "--grace", "--id", "--job-types"):
        assert flag in args, flag
    assert {v["name"] for v in pod["volumes"]} == {"tmp", "model-cache", "dshm"}
    assert pod["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == 1
