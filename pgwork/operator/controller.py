"""What the handlers do, without kopf: apply the owned objects; run one autoscaling round.

Each function reads the JobQueue body, does its I/O through Kube and QueueCache, and returns the
status to merge and the events to post, so handlers.py stays a thin layer over kopf.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from pgwork.models import COUNTS
from pgwork.operator import deletion_cost, render, schedules
from pgwork.operator.conditions import get_condition, set_condition, timestamp
from pgwork.operator.connbudget import Budgets, budget_condition
from pgwork.operator.db import WAITING, DatabaseProblem, QueueCache, count_cap, jobs_by_owner
from pgwork.operator.fields import SpecError
from pgwork.operator.firing import fire_jobqueue
from pgwork.operator.kube import Kube, KubeError
from pgwork.operator.metrics import OperatorMetrics
from pgwork.operator.scaling import ScaleMemory, decide, per_worker
from pgwork.operator.secrets import read_dsn, secret_source
from pgwork.operator.spec import JobQueueSpec, parse_spec
from pgwork.operator.vacuum import horizon_status, read_horizon

log = logging.getLogger("pgwork.operator")

# After a database failure the next try waits poll * 2**failures, up to this.
MAX_BACKOFF_SECONDS = 300.0
# JobQueues on one database reuse a backlog reading this fresh (see QueueCache.backlog).
SHARED_READING_SECONDS = 1.0
# A status that says nothing new is still written this often, so lastPollTime shows the
# operator alive; otherwise every poll would be a write (and a watch event for every client).
STATUS_REFRESH_SECONDS = 60.0
# The status field each count of pgwork.models.COUNTS is published as.
STATUS_NAMES = {name: name for name in COUNTS} | {"ready": "pending", WAITING: WAITING}
# The memo key the create/resume/update handler sets once the owned objects are applied.
APPLIED = "applied_generation"


@dataclass(frozen=True)
class Event:
    type: str  # Normal | Warning
    reason: str
    message: str


@dataclass
class StatusChange:
    """What a handler run decided to write back: status fields to merge, events to post."""

    status: dict[str, Any] = field(default_factory=dict)
    events: list[Event] = field(default_factory=list)


@dataclass
class Clients:
    """The operator's long-lived connections: the Kubernetes API, the databases, the metrics registry."""

    kube: Kube
    queues: QueueCache
    metrics: OperatorMetrics
    budgets: Budgets = field(default_factory=Budgets)
    # Tests fix the operator's clock; schedules then fire at it instead of the database's.
    fixed_clock: bool = False


def _conditions(body: Mapping[str, Any]) -> list[dict[str, Any]]:
    return list((body.get("status") or {}).get("conditions") or [])


def _generation(body: Mapping[str, Any]) -> int | None:
    value = (body.get("metadata") or {}).get("generation")
    return int(value) if value is not None else None


def reconcile(clients: Clients, body: Mapping[str, Any], now: float) -> StatusChange:
    """Render and apply the Deployment, CronJobs and Service. Raises SpecError on a bad spec
    (the caller reports it with `invalid_spec`) and KubeError on API trouble."""
    name = body["metadata"]["name"]
    namespace = body["metadata"]["namespace"]
    spec = parse_spec(body.get("spec"))
    manifests = render.render_all(body)
    done = []
    for manifest in manifests:
        # Replicas only on creation: afterwards the scaler owns them and a re-apply leaves them be.
        extra = {"replicas": render.initial_replicas(spec)} if manifest["kind"] == "Deployment" else None
        verb = clients.kube.apply(manifest, create_extra=extra)
        done.append(f"{manifest['kind']} {manifest['metadata']['name']} {verb}")
    change = StatusChange()
    change.status = {
        "selector": render.selector_string(name),
        "observedGeneration": _generation(body),
        "conditions": set_condition(
            _conditions(body),
            "Ready",
            True,
            "Applied",
            "; ".join(done),
            generation=_generation(body),
            now=now,
        ),
    }
    created = [d for d in done if d.endswith("created")]
    if created:
        change.events.append(Event("Normal", "Created", "; ".join(created)))
    log.info("jobqueue %s/%s: %s", namespace, name, "; ".join(done))
    return change


def invalid_spec(body: Mapping[str, Any], error: SpecError, now: float) -> StatusChange:
    change = StatusChange()
    change.status = {
        "observedGeneration": _generation(body),
        "conditions": set_condition(
            _conditions(body), "Ready", False, "InvalidSpec", str(error), generation=_generation(body), now=now
        ),
    }
    change.events.append(Event("Warning", "InvalidSpec", str(error)))
    return change


def _parse_timestamp(text: object) -> float | None:
    if not isinstance(text, str):
        return None
    try:
        return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()
    except ValueError:
        return None


def status_to_write(
    current: Mapping[str, Any] | None, new: Mapping[str, Any], now: float, refresh_seconds: float
) -> dict[str, Any]:
    """What of `new` to merge into the status: all of it when any field but lastPollTime
    differs, only lastPollTime when the last write is `refresh_seconds` old, else nothing."""
    current = current or {}
    if any(current.get(key) != value for key, value in new.items() if key != "lastPollTime"):
        return dict(new)
    if "lastPollTime" not in new:
        return {}
    written = _parse_timestamp(current.get("lastPollTime"))
    if written is None or now - written >= refresh_seconds:
        return {"lastPollTime": new["lastPollTime"]}
    return {}


def _due(memo: MutableMapping[str, Any], spec: JobQueueSpec, now: float) -> bool:
    return now >= float(memo.get("next_poll", 0.0))


def retry_delay(poll_seconds: float, failures: int) -> float:
    """Seconds before the next try after `failures` failed rounds in a row: doubling, capped."""
    return float(min(poll_seconds * 2 ** min(max(failures, 1) - 1, 16), MAX_BACKOFF_SECONDS))


def autoscale(
    clients: Clients, body: Mapping[str, Any], memo: MutableMapping[str, Any], now: float
) -> StatusChange | None:
    """One round: read the backlog, decide, annotate pods, patch replicas. None when not due,
    and None until the create/resume handler has applied the owned objects in this process: kopf
    adds its finalizer (a JSON-patch that tests resourceVersion) before it runs that handler, and
    status writes from this timer would make that patch fail over and over. It also waits until
    the body shows that handler's status (observedGeneration), as this round's conditions are
    built on the body's and would otherwise drop the handler's Ready."""
    applied = memo.get(APPLIED)
    if applied is None or (body.get("status") or {}).get("observedGeneration") != applied:
        return None
    try:
        spec = parse_spec(body.get("spec"))
    except SpecError:
        return None  # reconcile reports it; never scale on a spec we cannot read
    if not _due(memo, spec, now):
        return None
    name = body["metadata"]["name"]
    namespace = body["metadata"]["namespace"]
    generation = _generation(body)
    conditions = _conditions(body)
    deployment = render.names(name)["deployment"]
    change = StatusChange()

    try:
        current = clients.kube.deployment_replicas(namespace, deployment)
    except KubeError as exc:
        memo["next_poll"] = now + spec.scaling.poll_interval_seconds
        change.events.append(Event("Warning", "KubernetesError", f"reading Deployment {deployment}: {exc}"))
        return change
    if current is None:
        memo["next_poll"] = now + spec.scaling.poll_interval_seconds
        change.status = {
            "conditions": set_condition(
                conditions,
                "Scaling",
                False,
                "DeploymentMissing",
                f"Deployment {deployment} does not exist yet",
                generation=generation,
                now=now,
            )
        }
        return change

    dsn: str | None = None
    cap = count_cap(spec.scaling.max_replicas, per_worker(spec.scaling.target_backlog_per_worker, spec.worker.capacity))
    try:
        dsn = read_dsn(clients.kube, namespace, spec.database.default)
        queue = clients.queues.get((namespace, name), dsn)
        backlog = clients.queues.backlog(
            dsn,
            queue,
            spec.job_types,
            now=now,
            max_age=min(SHARED_READING_SECONDS, spec.scaling.poll_interval_seconds / 4),
            cap=cap,
        )
    except (DatabaseProblem, KubeError) as exc:
        problem = exc if isinstance(exc, DatabaseProblem) else DatabaseProblem("SecretUnreadable", str(exc))
        if problem.reason in ("InvalidDSN", "AccessDenied") and not problem.message.startswith("Secret "):
            # The fix is in the Secret: say which one (libpq's text, scrubbed, follows).
            source = secret_source(namespace, spec.database.default)
            problem = DatabaseProblem(problem.reason, f"{source}: {problem.message}")
        if dsn is not None:
            clients.queues.discard(dsn)
        return _database_down(
            clients, body, spec=spec, memo=memo, conditions=conditions, current=current, problem=problem, now=now
        )

    memo["failures"] = 0
    horizon = read_horizon(clients.queues, dsn, queue, now)
    at = schedules.fire_time(now, clients.fixed_clock)
    firing = fire_jobqueue(clients.kube, clients.queues, (namespace, name), spec, queue=queue, dsn=dsn, now=at)
    reported = memo.get("schedule_problems")
    fresh = schedules.new_problems(reported if isinstance(reported, tuple) else (), firing.problems)
    change.events += [Event("Warning", "ScheduleFailed", text) for text in fresh]
    memo["schedule_problems"] = tuple(firing.problems)
    memory = memo.get("scale_memory")
    decision = decide(
        spec.scaling,
        ready=backlog.ready,
        running=backlog.running,
        current=current,
        now=now,
        memory=memory if isinstance(memory, ScaleMemory) else None,
        external=spec.replicas,
        limited=backlog.limited,
        capacity=spec.worker.capacity,
    )
    memo["scale_memory"] = decision.memory
    memo["next_poll"] = now + spec.scaling.poll_interval_seconds
    replicas = current
    status: dict[str, Any] = {}
    if decision.changes(current):
        try:
            busy_note = ""
            if decision.desired < current:
                busy_note = _mark_deletion_costs(clients, namespace, name, spec, queue)
            clients.kube.scale_deployment(namespace, deployment, decision.desired)
        except (KubeError, DatabaseProblem) as exc:
            change.events.append(Event("Warning", "ScalingFailed", f"{current} → {decision.desired}: {exc}"))
        else:
            replicas = decision.desired
            status["lastScaleTime"] = timestamp(now)
            change.events.append(Event("Normal", decision.reason, decision.message + busy_note))
            log.info("jobqueue %s/%s: %s%s", namespace, name, decision.message, busy_note)

    previous_db = get_condition(conditions, "DatabaseReachable")
    if previous_db is not None and previous_db.get("status") == "False":
        change.events.append(Event("Normal", "DatabaseReachable", "the queue's database answers again"))
    conditions = set_condition(
        conditions, "DatabaseReachable", True, "Connected", "read the backlog", generation=generation, now=now
    )
    conditions = set_condition(
        conditions, "Scaling", True, decision.reason, decision.message, generation=generation, now=now
    )
    conditions, exceeded = budget_condition(
        clients.budgets, (namespace, name), spec, name=f"{namespace}/{name}", dsn=dsn, queue=queue,
        conditions=conditions, generation=generation, now=now,
    )  # fmt: skip
    if exceeded is not None:
        change.events.append(Event("Warning", "ConnectionBudgetExceeded", exceeded))
    ready = get_condition(conditions, "Ready")
    if ready is not None and ready.get("reason") in ("DatabaseUnreachable",):
        conditions = set_condition(
            conditions, "Ready", True, "Applied", "owned objects applied", generation=generation, now=now
        )
    status.update(
        {
            "pending": backlog.ready,
            "scheduled": backlog.scheduled,
            "retrying": backlog.retrying,
            "running": backlog.running,
            "dead": backlog.dead,
            # Waiting for parents: no worker can take them, so never part of the scaling decision.
            "waiting": backlog.waiting,
            "oldestWaitSeconds": round(backlog.oldest_wait_seconds, 3),
            "maxHeartbeatAgeSeconds": round(backlog.max_heartbeat_age_seconds, 3),
            **({"vacuumHorizon": horizon_status(horizon)} if horizon is not None else {}),
            # Counts stop at countCap (scaling cannot change past it); lowerBounds names the
            # counts that reached it, so read them as "at least".
            "countCap": cap,
            "lowerBounds": [STATUS_NAMES[name] for name in backlog.lower_bounds],
            "desiredReplicas": decision.desired,
            "replicas": replicas,
            "selector": render.selector_string(name),
            "lastPollTime": timestamp(now),
            "conditions": conditions,
        }
    )
    if spec.schedules:
        status["schedules"] = firing.status
    change.status = status
    clients.metrics.record(
        namespace,
        name,
        backlog,
        desired=decision.desired,
        current=replicas,
        heartbeat_seconds=spec.lease.heartbeat_seconds,
    )
    clients.metrics.record_without_consumer(*clients.queues.without_consumer((namespace, name), dsn, spec.job_types))
    clients.metrics.record_horizon(namespace, name, horizon)
    return change


def _mark_deletion_costs(clients: Clients, namespace: str, name: str, spec: JobQueueSpec, queue: Any) -> str:
    """Annotate worker pods so the idle ones go first; returns a note for the event."""
    held = jobs_by_owner(queue, spec.job_types)
    wanted = render.selector_labels(name)
    pods = [
        p
        for p in clients.kube.list_pods(namespace, render.selector_string(name))
        if all(((p.get("metadata") or {}).get("labels") or {}).get(k) == v for k, v in wanted.items())
    ]
    for pod_name, cost in deletion_cost.annotations_to_set(pods, held).items():
        clients.kube.annotate_pod(namespace, pod_name, {render.DELETION_COST: cost})
    busy = deletion_cost.busy_pods(pods, held)
    return f"; {busy} of {len(pods)} pods busy, idle ones marked to go first" if pods else ""


def _database_down(
    clients: Clients,
    body: Mapping[str, Any],
    *,
    spec: JobQueueSpec,
    memo: MutableMapping[str, Any],
    conditions: list[dict[str, Any]],
    current: int,
    problem: DatabaseProblem,
    now: float,
) -> StatusChange:
    """Report and back off; replicas stay as they are (an error never scales a queue down)."""
    name = body["metadata"]["name"]
    namespace = body["metadata"]["namespace"]
    generation = _generation(body)
    failures = int(memo.get("failures", 0)) + 1
    memo["failures"] = failures
    delay = retry_delay(spec.scaling.poll_interval_seconds, failures)
    memo["next_poll"] = now + delay
    change = StatusChange()
    previous = get_condition(conditions, "DatabaseReachable")
    if previous is None or previous.get("status") != "False" or previous.get("reason") != problem.reason:
        change.events.append(Event("Warning", problem.reason, problem.message))
    conditions = set_condition(
        conditions, "DatabaseReachable", False, problem.reason, problem.message, generation=generation, now=now
    )
    conditions = set_condition(
        conditions,
        "Scaling",
        False,
        "DatabaseUnreachable",
        f"replicas left at {current}; retrying in {delay:g}s (attempt {failures})",
        generation=generation,
        now=now,
    )
    conditions = set_condition(
        conditions, "Ready", False, "DatabaseUnreachable", problem.message, generation=generation, now=now
    )
    change.status = {"replicas": current, "lastPollTime": timestamp(now), "conditions": conditions}
    log.warning("jobqueue %s/%s: database: %s", namespace, name, problem)
    clients.metrics.record(
        namespace, name, None, desired=None, current=current, heartbeat_seconds=spec.lease.heartbeat_seconds
    )
    return change
