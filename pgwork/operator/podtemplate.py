"""`spec.worker.podTemplate` checked and merged under the operator's own pod. Pure: no I/O.

The user's template adds scheduling (node selectors, tolerations, affinity), volumes, envFrom,
resources, labels and sidecars; it never weakens what the operator guarantees: the restricted
Pod Security Standard, the worker's command, DATABASE_URL/POD_NAME, the selector labels, the
metrics port and the service account token rules. Fields that would weaken them are refused
(with the field named) rather than silently dropped, so a user learns why.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from pgwork.errors import InvalidArgument
from pgwork.operator import podrules

FIELD = "spec.worker.podTemplate"
WORKER = "worker"
# Pod fields that pass through as given: scheduling, pull secrets, DNS, runtime class.
POD_PASS_THROUGH = frozenset(
    {
        "nodeSelector",
        "tolerations",
        "affinity",
        "topologySpreadConstraints",
        "priorityClassName",
        "runtimeClassName",
        "imagePullSecrets",
        "schedulerName",
        "dnsPolicy",
        "dnsConfig",
        "hostAliases",
        "preemptionPolicy",
    }
)
# Pod fields the template may also hold, merged specially below.
POD_MERGED = frozenset({"volumes", "containers"})
# Pod fields that would break the hardening or the token rules: refused by name.
POD_REFUSED = {
    "hostNetwork": "shares the node's network",
    "hostPID": "shares the node's process table",
    "hostIPC": "shares the node's IPC namespace",
    "hostUsers": "is decided by the operator",
    "securityContext": "is set by the operator (the restricted Pod Security Standard)",
    "serviceAccountName": "is spec.worker.serviceAccountName",
    "automountServiceAccountToken": "is decided by the operator",
    "initContainers": "are the operator's (the migrate step)",
    "terminationGracePeriodSeconds": "is spec.worker.terminationGracePeriodSeconds",
    "nodeName": "bypasses the scheduler",
    "shareProcessNamespace": "would let a sidecar read the worker's memory",
}
# What a container named "worker" may add to the operator's worker container.
WORKER_MERGED = frozenset({"name", "volumeMounts", "envFrom", "env", "resources", "securityContext"})
RESERVED_ENV = frozenset({"DATABASE_URL", "POD_NAME"})


class TemplateRefused(InvalidArgument):
    def __init__(self, field: str, problem: str, fix: str) -> None:
        self.problem = problem
        self.fix = fix
        super().__init__(field, problem, fix)


def _object(value: Any, field: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise TemplateRefused(field, f"must be an object, got {type(value).__name__}", "see a Pod template")
    return value


def _list(value: Any, field: str) -> list[Any]:
    if not isinstance(value, list):
        raise TemplateRefused(field, f"must be a list, got {type(value).__name__}", "see a Pod template")
    return value


def _refuse(problem: podrules.Problem | None, field: str) -> None:
    if problem is not None:
        suffix, text, fix = problem
        where = field if not suffix else f"{field}{suffix}" if suffix.startswith("[") else f"{field}.{suffix}"
        raise TemplateRefused(where, text, fix)


def _check_env(env: Any, field: str) -> None:
    for i, entry in enumerate(_list(env, field)):
        name = entry.get("name") if isinstance(entry, Mapping) else None
        if name in RESERVED_ENV:
            raise TemplateRefused(f"{field}[{i}].name", f"{name} is set by the operator", "remove this entry")


def check(template: Any) -> dict[str, Any]:
    """The template as given, or TemplateRefused naming the first field that would weaken the pod."""
    root = _object(template, FIELD)
    for key in root:
        if key not in ("metadata", "spec"):
            raise TemplateRefused(f"{FIELD}.{key}", "is not a field here", "give metadata and spec")
    meta = _object(root.get("metadata") or {}, f"{FIELD}.metadata")
    for key in meta:
        if key not in ("labels", "annotations"):
            raise TemplateRefused(f"{FIELD}.metadata.{key}", "is not a field here", "give labels and annotations")
        values = _object(meta[key], f"{FIELD}.metadata.{key}")
        for k, v in values.items():
            if not isinstance(v, str):
                raise TemplateRefused(f"{FIELD}.metadata.{key}.{k}", "must be a string", "quote the value")
        check_meta = podrules.labels_problem if key == "labels" else podrules.annotations_problem
        _refuse(check_meta(values), f"{FIELD}.metadata.{key}")
    spec = _object(root.get("spec") or {}, f"{FIELD}.spec")
    where = f"{FIELD}.spec"
    for key in spec:
        if key in POD_REFUSED:
            raise TemplateRefused(f"{where}.{key}", POD_REFUSED[key], "leave it out of the pod template")
        if key not in POD_PASS_THROUGH and key not in POD_MERGED:
            raise TemplateRefused(f"{where}.{key}", "is not supported in a pod template", "see docs/operator.md")
    for i, raw_volume in enumerate(_list(spec.get("volumes", []), f"{where}.volumes")):
        volume = _object(raw_volume, f"{where}.volumes[{i}]")
        _refuse(podrules.volume_problem(volume), f"{where}.volumes[{i}]")
        if volume.get("name") == "tmp":
            raise TemplateRefused(f"{where}.volumes[{i}].name", "tmp is the operator's /tmp", "pick another name")
    names: set[str] = set()
    for i, raw_container in enumerate(_list(spec.get("containers", []), f"{where}.containers")):
        field = f"{where}.containers[{i}]"
        container = _object(raw_container, field)
        name = container.get("name")
        if not isinstance(name, str) or not name:
            raise TemplateRefused(
                f"{field}.name", "is required", f'"{WORKER}" merges into the worker; others are sidecars'
            )
        if name in names or name == "migrate":
            raise TemplateRefused(f"{field}.name", f"{name!r} is taken", "give each container its own name")
        names.add(name)
        if "securityContext" in container:
            ctx = _object(container["securityContext"], f"{field}.securityContext")
            _refuse(podrules.security_context_problem(ctx), f"{field}.securityContext")
        if "ports" in container:
            _refuse(podrules.ports_problem(_list(container["ports"], f"{field}.ports")), f"{field}.ports")
        if "env" in container:
            _check_env(container["env"], f"{field}.env")
        if name == WORKER:
            for key in container:
                if key not in WORKER_MERGED:
                    raise TemplateRefused(
                        f"{field}.{key}", "is set by the operator for the worker", "use spec.worker, or leave it out"
                    )
        elif not isinstance(container.get("image"), str) or not container["image"]:
            raise TemplateRefused(f"{field}.image", "is required for a sidecar", "name its image")
        else:
            plain = podrules.plain_env_names(container.get("env") or [])
            for part in ("command", "args"):
                argv = [a for a in _list(container.get(part) or [], f"{field}.{part}") if isinstance(a, str)]
                _refuse(podrules.argv_problem(argv, plain), f"{field}.{part}")
    return copy.deepcopy(dict(root))


def worker_env(template: Mapping[str, Any] | None) -> list[Any]:
    """The env entries a checked template adds to the worker container."""
    containers = ((template or {}).get("spec") or {}).get("containers") or []
    return [e for c in containers if c.get("name") == WORKER for e in c.get("env") or []]


def _by_name(items: list[dict[str, Any]], extra: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`items` first (they win on a name clash), then the extra entries with new names."""
    taken = {i.get("name") for i in items}
    return [*items, *(e for e in extra if e.get("name") not in taken)]


def merge(
    template: Mapping[str, Any] | None,
    pod: Mapping[str, Any],
    container_security: Mapping[str, Any],
    sidecar_mounts: tuple[Mapping[str, Any], ...] = (),
) -> dict[str, Any]:
    """The operator's pod template (`{metadata, spec}`) with the user's checked template merged under it.

    Operator labels, annotations, env and hardening win; sidecars get `container_security` and
    `sidecar_mounts` (a writable /tmp, since their root filesystem is read-only too).
    """
    merged = copy.deepcopy(dict(pod))
    if not template:
        return merged
    user = copy.deepcopy(dict(template))
    meta = merged.setdefault("metadata", {})
    user_meta = user.get("metadata") or {}
    for key in ("labels", "annotations"):
        if user_meta.get(key):
            meta[key] = {**user_meta[key], **meta.get(key, {})}
    spec = merged["spec"]
    user_spec = user.get("spec") or {}
    for key in POD_PASS_THROUGH:
        if key in user_spec:
            spec[key] = user_spec[key]
    if user_spec.get("volumes"):
        spec["volumes"] = _by_name(spec.get("volumes", []), user_spec["volumes"])
    containers = spec["containers"]
    for user_container in user_spec.get("containers", []):
        if user_container["name"] == WORKER:
            worker = next(c for c in containers if c["name"] == WORKER)
            worker["volumeMounts"] = _by_name(worker.get("volumeMounts", []), user_container.get("volumeMounts", []))
            worker["env"] = _by_name(worker.get("env", []), user_container.get("env", []))
            if user_container.get("envFrom"):
                worker["envFrom"] = [*worker.get("envFrom", []), *user_container["envFrom"]]
            if user_container.get("resources"):
                resources = dict(worker.get("resources", {}))
                for part, values in user_container["resources"].items():
                    resources[part] = {**resources.get(part, {}), **values} if isinstance(values, Mapping) else values
                worker["resources"] = resources
        else:
            sidecar = dict(user_container)
            sidecar["securityContext"] = copy.deepcopy(dict(container_security))
            sidecar["volumeMounts"] = _by_name([dict(m) for m in sidecar_mounts], sidecar.get("volumeMounts", []))
            containers.append(sidecar)
    return merged
