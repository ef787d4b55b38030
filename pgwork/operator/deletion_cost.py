"""Which worker pods are cheap to remove. Pure.

Before lowering replicas the operator annotates every worker pod with
`controller.kubernetes.io/pod-deletion-cost` = jobs it holds (lease owner = pod name), so the
ReplicaSet controller removes idle pods before busy ones. A busy pod that still goes (because
fewer idle pods exist than replicas to remove) drains on SIGTERM.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pgwork.operator.render import DELETION_COST

# Jobs held → cost. Scaled so a pod with one job outranks any idle pod by a clear margin and
# stays well inside the int32 the annotation must hold.
COST_PER_JOB = 100
MAX_COST = 2_000_000_000


def cost(jobs_held: int) -> int:
    return min(max(0, jobs_held) * COST_PER_JOB, MAX_COST)


def annotations_to_set(pods: Sequence[Mapping[str, Any]], jobs_by_owner: Mapping[str, int]) -> dict[str, str]:
    """{pod name: new cost} for live pods whose annotation is missing or different."""
    changes: dict[str, str] = {}
    for pod in pods:
        meta = pod.get("metadata", {})
        name = meta.get("name")
        if not name or meta.get("deletionTimestamp"):
            continue  # already going: its cost no longer matters
        wanted = str(cost(jobs_by_owner.get(name, 0)))
        if (meta.get("annotations") or {}).get(DELETION_COST) != wanted:
            changes[name] = wanted
    return changes


def busy_pods(pods: Sequence[Mapping[str, Any]], jobs_by_owner: Mapping[str, int]) -> int:
    return sum(1 for p in pods if jobs_by_owner.get(p.get("metadata", {}).get("name", ""), 0) > 0)
