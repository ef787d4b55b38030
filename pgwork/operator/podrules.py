"""The rules a worker pod's parts must meet, beyond the shape podtemplate.check reads. Pure: no I/O.

The operator creates pods with its own service account on behalf of whoever may create a
JobQueue, so whatever a template passes through is a privilege the JobQueue's author borrows.
The rules are allow-lists where the set is known (volume sources, profile types), so a field
Kubernetes adds later is refused until someone decides it is safe, rather than passed through.
Each returns None or (field suffix, problem naming the rule, fix).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from pgwork.operator import kubenames

Problem = tuple[str, str, str]

# The restricted Pod Security Standard's volume types, plus PVC-like sources that mount nothing of
# the node's: remote storage (nfs, iscsi, cephfs...), flexVolume and gitRepo (which runs git on the
# node) and hostPath are not here.
ALLOWED_VOLUMES = frozenset(
    {"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim", "projected", "secret"}
)
VOLUME_RULE = "allowed volume types (restricted Pod Security Standard): " + ", ".join(sorted(ALLOWED_VOLUMES))
# Annotations that set (or unset) the AppArmor and seccomp profiles the operator gives every pod.
PROFILE_ANNOTATIONS = (
    "container.apparmor.security.beta.kubernetes.io/",
    "seccomp.security.alpha.kubernetes.io/pod",
    "container.seccomp.security.alpha.kubernetes.io/",
)
SAFE_PROFILE_TYPES = frozenset({"RuntimeDefault", "Localhost"})
LABEL_VALUE_MAX = 63
LABEL_NAME_MAX = 63
_LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
_QUALIFIED_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
ANNOTATIONS_MAX_BYTES = 256 * 1024
# `$(NAME)` in a container's command or args is expanded by the kubelet into the process's argv
# (visible in /proc and `ps` to every process on the node); `$$` escapes it.
_EXPANSION = re.compile(r"\$\$|\$\(([^)]*)\)")


def volume_problem(volume: Mapping[str, Any]) -> Problem | None:
    sources = [key for key in volume if key != "name"]
    for source in sources:
        if source not in ALLOWED_VOLUMES:
            return source, f"{source} volumes are refused ({VOLUME_RULE})", "use a PVC, CSI or emptyDir volume"
    if len(sources) > 1:
        return sources[1], "a volume has one source", "give each source its own volume"
    return None


def is_qualified_name(key: object) -> bool:
    """A label or annotation key as Kubernetes checks it: [prefix/]name."""
    if not isinstance(key, str):
        return False
    prefix, _, name = key.rpartition("/")
    if prefix and not kubenames.is_dns1123_subdomain(prefix):
        return False
    return 0 < len(name) <= LABEL_NAME_MAX and bool(_QUALIFIED_NAME.fullmatch(name))


def is_label_value(value: object) -> bool:
    return isinstance(value, str) and len(value) <= LABEL_VALUE_MAX and bool(_LABEL_VALUE.fullmatch(value))


def labels_problem(labels: Mapping[str, Any]) -> Problem | None:
    for key, value in labels.items():
        if not is_qualified_name(key):
            return key, "is not a valid label key (Kubernetes: [prefix/]name, name at most 63 characters)", _KEY_FIX
        if not is_label_value(value):
            return (
                key,
                "is not a valid label value (Kubernetes: at most 63 characters, letters, digits, '-', '_', '.', "
                "starting and ending with a letter or digit)",
                "shorten it or put it in an annotation",
            )
    return None


_KEY_FIX = "e.g. team or example.com/team"


def annotations_problem(annotations: Mapping[str, Any]) -> Problem | None:
    size = 0
    for key, value in annotations.items():
        if not is_qualified_name(key):
            return key, "is not a valid annotation key (Kubernetes: [prefix/]name)", _KEY_FIX
        size += len(key.encode()) + len(str(value).encode())
        if key.startswith(PROFILE_ANNOTATIONS) and not (value == "runtime/default" or value.startswith("localhost/")):
            return (
                key,
                f"{value[:40]!r} is refused (AppArmor and seccomp stay confined: runtime/default or localhost/...)",
                "leave the profile to the operator (RuntimeDefault)",
            )
    if size > ANNOTATIONS_MAX_BYTES:
        return "", f"total {size} bytes, over Kubernetes' {ANNOTATIONS_MAX_BYTES}", "shorten the annotations"
    return None


def security_context_problem(ctx: Mapping[str, Any]) -> Problem | None:
    """A container securityContext that would leave the restricted standard (the operator replaces
    it anyway; refusing says why instead of silently dropping what was asked)."""
    if ctx.get("privileged"):
        return "privileged", "is refused (restricted standard)", "pgwork pods meet the restricted standard"
    if ctx.get("allowPrivilegeEscalation"):
        return "allowPrivilegeEscalation", "is refused (restricted standard: no privilege escalation)", "leave it out"
    caps = ctx.get("capabilities") or {}
    if isinstance(caps, Mapping) and caps.get("add"):
        return "capabilities.add", "is refused (restricted standard)", "pgwork drops ALL capabilities"
    if ctx.get("runAsNonRoot") is False or ctx.get("runAsUser") == 0:
        return "runAsUser", "root is refused (restricted standard)", "the pod runs as user 10001"
    for profile in ("seccompProfile", "appArmorProfile"):
        value = ctx.get(profile)
        if value is None:
            continue
        kind = value.get("type") if isinstance(value, Mapping) else value
        if kind not in SAFE_PROFILE_TYPES:
            return f"{profile}.type", f"{str(kind)[:40]!r} is refused (RuntimeDefault or Localhost)", "leave it out"
    if ctx.get("procMount") not in (None, "Default"):
        return "procMount", "is refused (restricted standard: Default only)", "leave it out"
    if isinstance(ctx.get("windowsOptions"), Mapping) and ctx["windowsOptions"].get("hostProcess"):
        return "windowsOptions.hostProcess", "is refused (restricted standard)", "leave it out"
    if "seLinuxOptions" in ctx:
        return "seLinuxOptions", "is set by the operator's runtime default", "leave it out"
    return None


def ports_problem(ports: Iterable[Any]) -> Problem | None:
    for i, port in enumerate(ports):
        if isinstance(port, Mapping) and port.get("hostPort"):
            return f"[{i}].hostPort", "is refused (restricted standard: no host ports)", "use a Service"
    return None


def expanded_names(argv: Iterable[str]) -> list[str]:
    """The variable names `$(NAME)` in `argv` that the kubelet would expand (`$$(NAME)` is literal)."""
    return [m.group(1) for arg in argv for m in _EXPANSION.finditer(arg) if m.group(1) is not None]


def plain_env_names(env: Iterable[Any]) -> set[str]:
    """Names whose value is not a Secret's: a literal value, a field or a ConfigMap key."""
    names = set()
    for entry in env:
        if not isinstance(entry, Mapping) or not isinstance(entry.get("name"), str):
            continue
        source = entry.get("valueFrom")
        if source is None or (isinstance(source, Mapping) and "secretKeyRef" not in source):
            names.add(entry["name"])
    return names


def argv_problem(argv: Iterable[str], plain: set[str]) -> Problem | None:
    """`$(NAME)` of anything but a plain variable: a Secret-backed one (DATABASE_URL, a secretKeyRef,
    or any name envFrom may bring) would reach the process's command line."""
    for name in expanded_names(argv):
        if name not in plain or name == "DATABASE_URL":
            return (
                "",
                f"$({name[:40]}) may expand a Secret into the command line, where every process on the node reads it",
                "read the variable from the environment in your code; $$(NAME) writes a literal $(NAME)",
            )
    return None
