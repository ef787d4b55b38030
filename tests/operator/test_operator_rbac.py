"""rbac.yaml is least privilege: exactly what the operator needs. Every call the operator makes in
the emulator tests is checked against it at each emulator's teardown (harness.record_calls); the
tests here show that check refuses what it must."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from pgwork.operator.permissions import denied, granted, load_rules, required_permissions
from tests.support.operator import record_calls

RBAC = Path(__file__).parents[2] / "pgwork" / "operator" / "rbac.yaml"


def test_rbac_file_is_one_plain_rules_document() -> None:
    documents = list(yaml.safe_load_all(RBAC.read_text()))
    assert len(documents) == 1
    (document,) = documents
    assert document["kind"] == "ClusterRole"
    for rule in document["rules"]:
        assert set(rule) == {"apiGroups", "resources", "verbs"}
        assert "*" not in rule["apiGroups"] + rule["resources"] + rule["verbs"]


def test_rbac_grants_exactly_what_is_required() -> None:
    rules = load_rules()
    assert denied(required_permissions(), rules) == []
    assert granted(rules) - required_permissions() == set(), "granted but never needed"


def _call(verb: str, group: str, resource: str) -> dict[str, str]:
    return {"verb": verb, "group": group, "resource": resource}


def test_recording_accepts_the_calls_the_operator_needs() -> None:
    record_calls([_call(verb, group, resource) for group, resource, verb in sorted(required_permissions())])


@pytest.mark.parametrize(
    "call",
    [
        _call("list", "", "secrets"),
        _call("delete", "apps", "deployments"),
        _call("create", "", "pods"),
        _call("get", "", "configmaps"),
    ],
    ids=lambda c: f"{c['verb']}-{c['group'] or 'core'}-{c['resource']}",
)
def test_recording_refuses_a_call_outside_the_rules(call: dict[str, str]) -> None:
    with pytest.raises(AssertionError, match="does not allow"):
        record_calls([_call("get", "", "secrets"), call])
