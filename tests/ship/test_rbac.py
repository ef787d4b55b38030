"""The chart's RBAC against what the operator does: every permission the operator needs (the
calls it makes in the emulator tests are checked against that same list as they are made, see
tests/operator/harness.record_calls) and every call visible in its code is allowed, nothing uses
`*`, and the chart's copy equals pgwork/operator/rbac.yaml."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pgwork.operator.permissions import required_permissions
from tests.support.rbac import allows, expand, wildcards
from tests.support.scripts import load_script
from tests.support.ship import CHART, ROOT, ci_values, helm_template, load_yaml

sync_chart = load_script("sync_chart")

RBAC_SOURCE = ROOT / "pgwork" / "operator" / "rbac.yaml"

# What the operator's code visibly asks of the API (pgwork/operator/kube.py and the kopf handlers),
# kept as a second, independent list: the recorded calls only cover paths the tests exercised.
CALLS_IN_CODE = [
    # kopf: discovery, watching JobQueues, progress annotations, status, events, peering
    ("list", "apiextensions.k8s.io", "customresourcedefinitions"),
    ("watch", "apiextensions.k8s.io", "customresourcedefinitions"),
    ("list", "pgwork.dev", "jobqueues"),
    ("watch", "pgwork.dev", "jobqueues"),
    ("patch", "pgwork.dev", "jobqueues"),
    ("patch", "pgwork.dev", "jobqueues/status"),
    ("create", "", "events"),
    ("list", "kopf.dev", "kopfpeerings"),
    ("watch", "kopf.dev", "kopfpeerings"),
    ("patch", "kopf.dev", "kopfpeerings"),
    ("list", "kopf.dev", "clusterkopfpeerings"),
    ("watch", "kopf.dev", "clusterkopfpeerings"),
    ("patch", "kopf.dev", "clusterkopfpeerings"),
    # Kube.apply: GET, then POST or server-side-apply PATCH, for each owned kind
    *[
        (verb, group, plural)
        for verb in ("get", "create", "patch")
        for group, plural in (("apps", "deployments"), ("batch", "cronjobs"), ("", "services"))
    ],
    # Kube.read_secret (CoreV1Api.read_namespaced_secret), list_pods, annotate_pod, scale_deployment
    ("get", "", "secrets"),
    ("list", "", "pods"),
    ("patch", "", "pods"),
]

# Things the operator must never be able to do.
FORBIDDEN = [
    ("list", "", "secrets"),
    ("watch", "", "secrets"),
    ("delete", "apps", "deployments"),
    ("delete", "", "pods"),
    ("create", "", "pods"),
    ("delete", "pgwork.dev", "jobqueues"),
    ("create", "rbac.authorization.k8s.io", "roles"),
    ("create", "apiextensions.k8s.io", "customresourcedefinitions"),
]


def roles(objects: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objects if o["kind"] == kind]


def cluster_scope_rules() -> list[dict[str, Any]]:
    (role,) = roles(helm_template(), "ClusterRole")
    return list(role["rules"])


def namespace_scope_rules() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    objects = helm_template("-f", str(CHART / "ci" / "namespaced-values.yaml"))
    (role,) = roles(objects, "Role")
    (cluster_role,) = roles(objects, "ClusterRole")
    assert role["metadata"]["namespace"] == "pgwork"
    return list(role["rules"]), list(cluster_role["rules"])


def calls() -> list[tuple[str, str, str]]:
    """(verb, group, resource): what permissions.py says the operator needs, and what its code visibly calls."""
    needed = {(verb, group, resource) for group, resource, verb in required_permissions()}
    return sorted(needed | set(CALLS_IN_CODE))


# ---------------------------------------------------------------- the pure checker


@pytest.mark.parametrize(
    ("rules", "call", "allowed"),
    [
        ([{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}], ("list", "", "pods"), True),
        ([{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}], ("patch", "", "pods"), False),
        ([{"apiGroups": ["apps"], "resources": ["pods"], "verbs": ["list"]}], ("list", "", "pods"), False),
        ([{"apiGroups": ["x"], "resources": ["q"], "verbs": ["patch"]}], ("patch", "x", "q/status"), False),
        ([{"apiGroups": ["x"], "resources": ["q/status"], "verbs": ["patch"]}], ("patch", "x", "q/status"), True),
        ([{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}], ("delete", "a", "b"), True),
        (
            [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"], "resourceNames": ["a"]}],
            ("get", "", "secrets"),
            False,
        ),
        ([], ("get", "", "pods"), False),
    ],
)
def test_allows(rules: list[dict[str, Any]], call: tuple[str, str, str], allowed: bool) -> None:
    assert allows(rules, *call) is allowed


def test_wildcards_are_found() -> None:
    assert wildcards([{"apiGroups": [""], "resources": ["*"], "verbs": ["get"]}]) == ["rules[0].resources"]
    assert wildcards([{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]) == []


# ---------------------------------------------------------------- the chart against the operator


def test_the_code_calls_only_what_permissions_lists() -> None:
    listed = {(verb, group, resource) for group, resource, verb in required_permissions()}
    assert set(CALLS_IN_CODE) - listed == set()


def test_chart_rules_equal_the_operator_rbac_file() -> None:
    source = load_yaml(RBAC_SOURCE)["rules"]
    chart_file = load_yaml(CHART / "files" / "rbac-rules.yaml")
    assert expand(chart_file["clusterRules"]) | expand(chart_file["namespacedRules"]) == expand(source)
    assert expand(cluster_scope_rules()) == expand(source)


@pytest.mark.parametrize("call", calls(), ids=lambda c: f"{c[0]}-{c[1] or 'core'}-{c[2]}")
def test_cluster_scope_allows_operator_call(call: tuple[str, str, str]) -> None:
    assert allows(cluster_scope_rules(), *call), f"ClusterRole does not allow {call}"


@pytest.mark.parametrize("call", calls(), ids=lambda c: f"{c[0]}-{c[1] or 'core'}-{c[2]}")
def test_namespace_scope_allows_operator_call(call: tuple[str, str, str]) -> None:
    role, cluster_role = namespace_scope_rules()
    resource = call[2].split("/")[0]
    # A cluster-scoped resource can only be granted by the ClusterRole; a namespaced one by the Role.
    rules = cluster_role if resource in sync_chart.CLUSTER_SCOPED else role
    assert allows(rules, *call), f"namespace-scoped install does not allow {call}"


def test_namespace_scope_grants_nothing_namespaced_cluster_wide() -> None:
    role, cluster_role = namespace_scope_rules()
    for _, _, resource in expand(cluster_role):
        assert resource.split("/")[0] in sync_chart.CLUSTER_SCOPED, resource
    for _, _, resource in expand(role):
        assert resource.split("/")[0] not in sync_chart.CLUSTER_SCOPED, resource


@pytest.mark.parametrize("call", FORBIDDEN, ids=lambda c: f"{c[0]}-{c[1] or 'core'}-{c[2]}")
def test_least_privilege(call: tuple[str, str, str]) -> None:
    role, cluster_role = namespace_scope_rules()
    assert not allows(cluster_scope_rules(), *call)
    assert not allows(role + cluster_role, *call)


@pytest.mark.parametrize("values", ci_values(), ids=lambda p: p.name)
def test_no_rule_uses_a_wildcard(values: Path) -> None:
    assert wildcards(load_yaml(RBAC_SOURCE)["rules"]) == []
    for obj in helm_template("-f", str(values)):
        if obj["kind"] in {"Role", "ClusterRole"}:
            assert wildcards(obj["rules"]) == [], obj["metadata"]["name"]


@pytest.mark.parametrize("values", ci_values(), ids=lambda p: p.name)
def test_bindings_grant_the_roles_to_the_operator_service_account(values: Path) -> None:
    objects = helm_template("-f", str(values))
    # The operator's Deployment (the chart may also render the console's, which holds no token).
    deployment = next(
        o
        for o in objects
        if o["kind"] == "Deployment" and o["metadata"]["labels"].get("app.kubernetes.io/component") == "operator"
    )
    account = deployment["spec"]["template"]["spec"]["serviceAccountName"]
    assert any(o["kind"] == "ServiceAccount" and o["metadata"]["name"] == account for o in objects)
    roles_by_name = {(o["kind"], o["metadata"]["name"]) for o in objects if o["kind"] in {"Role", "ClusterRole"}}
    bindings = [o for o in objects if o["kind"] in {"RoleBinding", "ClusterRoleBinding"}]
    assert bindings
    for binding in bindings:
        assert (binding["roleRef"]["kind"], binding["roleRef"]["name"]) in roles_by_name
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": account, "namespace": "pgwork"}]
