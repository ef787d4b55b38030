"""rbac.yaml is least privilege: exactly what the operator needs, and every call it made in
the emulator tests (tests/operator/api_calls.json, rewritten by those tests) is allowed."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from pgwork.operator.permissions import denied, granted, load_rules, required_permissions

CALLS = Path(__file__).parent / "api_calls.json"
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


def test_every_observed_call_is_allowed() -> None:
    calls = [(c["group"], c["resource"], c["verb"]) for c in json.loads(CALLS.read_text())]
    assert len(calls) >= 15, "the emulator tests record the operator's calls"
    assert denied(calls, load_rules()) == []
    assert set(calls) <= required_permissions()
