"""How many workers a queue should have. Pure: figures and `now` in, a decision out.

A worker's capacity is the jobs one pod takes at once: concurrency * batch (each of its runners is
handed up to `batch` jobs). The rule: ceil((ready + running) / per_worker), per_worker being the
target backlog per worker but never below the capacity, clamped to [min, max]. Below it, one pod's
own claim would ask for more pods (batch 64 against target 5: 13 GPU pods for one pod's batch),
each of which could only take work away from a batch that was filling. Up at once; down only to the
highest recommendation seen over the stabilization window (as the HPA does), so a brief lull
does not shed workers that the next burst needs; from zero only when more than `activation`
jobs are ready. A change of bounds applies at once.

A job type with a fleet-wide limit (`pgwork limits set`) counts only the work the limit lets run:
at most max_running of its jobs, and of its ready jobs no more than one rate period's claims; and
it never asks for more workers than ceil(max_running / capacity), the fewest that can run
max_running jobs at once. More would sit idle beside a backlog they may not claim.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from pgwork.operator.spec import ScalingSpec


@dataclass(frozen=True)
class LimitedWork:
    """One limited job type's share of a queue's figures, with its limit (None: not limited so)."""

    job_type: str
    ready: int
    running: int
    max_running: int | None = None
    rate_count: int | None = None  # claims per rate period


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


def per_worker(target: int, capacity: int) -> int:
    """Jobs counted per worker: the target backlog, never below what one pod takes at once."""
    return max(target, capacity, 1)


def recommend(
    policy: ScalingSpec,
    ready: int,
    running: int,
    current: int,
    *,
    limited: Sequence[LimitedWork] = (),
    capacity: int = 1,
) -> int:
    """The replicas the backlog asks for right now, before stabilization. `ready` and `running`
    are the queue's totals; `limited` the limited types' shares of them; `capacity` the jobs one
    worker pod takes at once (concurrency * batch)."""
    if current == 0 and running == 0 and ready <= policy.activation_backlog:
        raw = 0
    else:
        raw = workers_for_work(policy.target_backlog_per_worker, ready, running, limited, capacity)
    return min(max(raw, policy.min_replicas), policy.max_replicas)


def workers_for_work(
    target: int, ready: int, running: int, limited: Sequence[LimitedWork] = (), capacity: int = 1
) -> int:
    """Workers for the unlimited work at per_worker(target, capacity) jobs each, plus each limited
    type's own (pure)."""
    each = per_worker(target, capacity)
    free = max(0, ready - sum(w.ready for w in limited)) + max(0, running - sum(w.running for w in limited))
    return math.ceil(free / each) + sum(limited_workers(w, each, capacity) for w in limited)


def limited_workers(work: LimitedWork, target: int, capacity: int) -> int:
    """The workers one limited type can use (pure): its work at `target` jobs each, and never more
    than the fewest pods of `capacity` jobs that can hold max_running."""
    ready = max(0, work.ready)
    if work.rate_count is not None:
        ready = min(ready, work.rate_count)
    jobs = ready + max(0, work.running)
    if work.max_running is None:
        return math.ceil(jobs / target)
    return min(math.ceil(min(jobs, work.max_running) / target), math.ceil(work.max_running / max(1, capacity)))


def decide(
    policy: ScalingSpec,
    *,
    ready: int,
    running: int,
    current: int,
    now: float,
    memory: ScaleMemory | None = None,
    external: int | None = None,
    limited: Sequence[LimitedWork] = (),
    capacity: int = 1,
) -> Decision:
    """The replicas to set now. `external` is spec.replicas (set via the scale subresource)."""
    memory = memory or ScaleMemory()
    since = memory.since if memory.since is not None else now
    window = policy.scale_down_stabilization_seconds
    raw = (
        min(max(external, policy.min_replicas), policy.max_replicas)
        if external is not None
        else recommend(policy, ready, running, current, limited=limited, capacity=capacity)
    )
    kept = tuple((t, r) for t, r in memory.recommendations if now - t < window)
    new_memory = ScaleMemory(since, (*kept, (now, raw)))
    work = f"{ready} ready + {running} running, target {policy.target_backlog_per_worker}/worker"
    if capacity > policy.target_backlog_per_worker:
        work += f" (counted as {capacity}/worker: one pod takes concurrency * batch = {capacity} jobs at once)"
    if limited:
        work += "; limited: " + ", ".join(_limit_text(w) for w in limited)

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


def _limit_text(work: LimitedWork) -> str:
    parts = [f"max {work.max_running} running"] if work.max_running is not None else []
    if work.rate_count is not None:
        parts.append(f"{work.rate_count} claims/period")
    return f"{work.job_type} {' and '.join(parts)}"
