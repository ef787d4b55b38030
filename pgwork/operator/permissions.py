"""The API permissions the operator needs, and a check of an RBAC rules list against them.
Pure: tests compare these with rbac.yaml and with the calls the operator really made."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from importlib import resources
from typing import Any

Permission = tuple[str, str, str]  # (api group, resource, verb)


def required_permissions() -> set[Permission]:
    """What kopf and the operator's own client call, by (group, resource, verb)."""
    needed: set[Permission] = set()

    def add(group: str, resource: str, *verbs: str) -> None:
        needed.update((group, resource, verb) for verb in verbs)

    # kopf: resource discovery and the watched resources.
    add("apiextensions.k8s.io", "customresourcedefinitions", "list", "watch")
    add("", "namespaces", "list", "watch")  # namespace globs (--namespace 'team-*')
    add("kopf.dev", "clusterkopfpeerings", "list", "watch", "patch", "get")
    add("kopf.dev", "kopfpeerings", "list", "watch", "patch", "get")
    add("pgwork.dev", "jobqueues", "list", "watch", "patch", "get")
    add("pgwork.dev", "jobqueues/status", "get", "patch")
    add("", "events", "create")
    add("events.k8s.io", "events", "create")
    # kube.py: create-or-apply owned objects, scale, read the DSN, mark pods.
    for group, resource in (("apps", "deployments"), ("batch", "cronjobs"), ("", "services")):
        add(group, resource, "get", "create", "patch")
    add("", "secrets", "get")
    add("", "pods", "list", "patch")
    return needed


def load_rules() -> list[dict[str, Any]]:
    import yaml

    document = yaml.safe_load(resources.files("pgwork.operator").joinpath("rbac.yaml").read_text())
    return list(document["rules"])


def granted(rules: Sequence[Mapping[str, Any]]) -> set[Permission]:
    """Every (group, resource, verb) the rules grant (no wildcards are allowed in ours)."""
    out: set[Permission] = set()
    for rule in rules:
        for group in rule.get("apiGroups", []):
            for resource in rule.get("resources", []):
                for verb in rule.get("verbs", []):
                    out.add((group, resource, verb))
    return out


def denied(calls: Iterable[Permission], rules: Sequence[Mapping[str, Any]]) -> list[Permission]:
    allowed = granted(rules)
    return sorted({c for c in calls if c not in allowed})
