"""Does a set of RBAC rules allow an API call? The subset of Kubernetes' RBAC evaluation the
chart needs (no wildcards, no resourceNames, no aggregation), as a pure function."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any


def allows(rules: Iterable[Mapping[str, Any]], verb: str, group: str, resource: str) -> bool:
    """True when one rule names the group, the resource (with subresource, e.g. jobqueues/status)
    and the verb. Wildcards count, so a test can prove there are none separately."""
    for rule in rules:
        groups = rule.get("apiGroups", [])
        resources = rule.get("resources", [])
        verbs = rule.get("verbs", [])
        if (
            (group in groups or "*" in groups)
            and (resource in resources or "*" in resources)
            and (verb in verbs or "*" in verbs)
            and not rule.get("resourceNames")
        ):
            return True
    return False


def wildcards(rules: Iterable[Mapping[str, Any]]) -> list[str]:
    found = []
    for i, rule in enumerate(rules):
        for field in ("apiGroups", "resources", "verbs", "resourceNames", "nonResourceURLs"):
            if any("*" in str(value) for value in rule.get(field, [])):
                found.append(f"rules[{i}].{field}")
    return found


def expand(rules: Iterable[Mapping[str, Any]]) -> set[tuple[str, str, str]]:
    """Every (verb, group, resource) a rule list grants: compares rule lists regardless of grouping."""
    return {
        (verb, group, resource)
        for rule in rules
        for group in rule.get("apiGroups", [])
        for resource in rule.get("resources", [])
        for verb in rule.get("verbs", [])
    }
