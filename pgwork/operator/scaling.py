"""How many workers a queue should have. Pure: figures and `now` in, a decision out.

The rule: ceil((ready + running) / target), clamped to [min, max]. Up at once; down only to the
highest recommendation seen over the stabilization window (as the HPA does), so a brief lull
does not shed workers that the next burst needs; from zero only when more than `activation`
jobs are ready. A change of bounds applies at once.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from pgwork.operator.spec import ScalingSpec


@dataclass(frozen=True)
class ScaleMemory:
    """What one round hands to the next: recent recommendations and when we started watching."""

    since: float | None = None
    recommendations: tuple[tuple[float, int], ...] = field(default_factory=tuple)


@dataclass(frozen=True)
class Decision:
    desired: int
    reason: str  # ScaledUp, ScaledDown, Stabilizing, Steady, External
    message: str
    memory: ScaleMemory

    def changes(self, current: int) -> bool:
        return self.desired != current


def recommend(policy: ScalingSpec, ready: int, running: int, current: int) -> int:
    """The replicas the backlog asks for right now, before stabilization."""
    work = max(0, ready) + max(0, running)
    if current == 0 and running == 0 and ready <= policy.activation_backlog:
        raw = 0
    else:
        raw = math.ceil(work / policy.target_backlog_per_worker)
    return min(max(raw, policy.min_replicas), policy.max_replicas)


def decide(
    policy: ScalingSpec,
    *,
    ready: int,
    running: int,
    current: int,
    now: float,
    memory: ScaleMemory | None = None,
    external: int | None = None,
) -> Decision:
    """The replicas to set now. `external` is spec.replicas (set via the scale subresource)."""
    memory = memory or ScaleMemory()
    since = memory.since if memory.since is not None else now
    window = policy.scale_down_stabilization_seconds
    raw = (
        min(max(external, policy.min_replicas), policy.max_replicas)
        if external is not None
        else recommend(policy, ready, running, current)
    )
    kept = tuple((t, r) for t, r in memory.recommendations if now - t < window)
    new_memory = ScaleMemory(since, (*kept, (now, raw)))
    work = f"{ready} ready + {running} running, target {policy.target_backlog_per_worker}/worker"

    if external is not None:
        verb = "Steady" if raw == current else "External"
        return Decision(raw, verb, f"following spec.replicas={external} within bounds → {raw}", new_memory)
    if current > policy.max_replicas:
        # A lowered bound applies at once; raw <= max, so raw > current below also covers min.
        top = policy.max_replicas
        return Decision(top, "ScaledDown", f"{current} → {top}: above maxReplicas ({work})", new_memory)
    if raw > current:
        return Decision(raw, "ScaledUp", f"{current} → {raw} ({work})", new_memory)
    if raw == current:
        return Decision(current, "Steady", f"{current} replicas ({work})", new_memory)
    # Lower: only once the whole window has been watched, and only to its highest recommendation.
    watched = now - since
    if watched < window:
        return Decision(
            current,
            "Stabilizing",
            f"would scale {current} → {raw}; holding {window - watched:.0f}s more (stabilization window)",
            new_memory,
        )
    target = max(r for _, r in new_memory.recommendations)
    if target >= current:
        return Decision(
            current,
            "Stabilizing",
            f"would scale {current} → {raw}; the last {window:g}s asked for up to {target}",
            new_memory,
        )
    return Decision(target, "ScaledDown", f"{current} → {target} ({work})", new_memory)
