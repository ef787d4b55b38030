"""The kopf layer: thin handlers over controller.py, and settings tuned in one startup hook.

`build_registry(options)` makes a fresh registry per operator run, so tests can start the real
operator several times in one process with different options.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import kopf

from pgwork.operator import controller, firing
from pgwork.operator.controller import Clients, StatusChange
from pgwork.operator.db import QueueCache, QueueFactory, default_factory
from pgwork.operator.fields import SpecError
from pgwork.operator.kube import USER_AGENT, Kube, KubeError, configuration_from_kopf, default_configuration
from pgwork.operator.metrics import OperatorMetrics
from pgwork.operator.spec import GROUP, PLURAL, VERSION

log = logging.getLogger("pgwork.operator")


@dataclass
class OperatorOptions:
    namespaces: list[str] = field(default_factory=list)
    clusterwide: bool = False
    metrics_port: int | None = 8080
    # How often the timer wakes; each JobQueue is polled per its own spec.scaling.pollIntervalSeconds.
    tick_seconds: float = 1.0
    standalone: bool = False
    peering_name: str = "pgwork"
    priority: int | None = None
    # Tells replicas apart in the API server's logs (the client's user agent).
    identity: str = ""
    # Tests hand kopf (and so the official client) a ConnectionInfo for the emulator.
    connection: Any = None
    executor_workers: int = 8
    retry_backoff_seconds: float = 10.0
    queue_factory: QueueFactory = default_factory
    # Tests fix the clock (seconds since the epoch); schedules then fire at it, not the database's.
    clock: Callable[[], float] | None = None
    # Set by the startup hook; tests read it to measure and to close things.
    clients: Clients | None = None


def _post(body: Any, change: StatusChange, patch: Any, *, only_changes: bool = False, now: float = 0.0) -> None:
    for event in change.events:
        kopf.event(body, type=event.type, reason=event.reason, message=event.message[:1000])
    status = change.status
    if only_changes:
        status = controller.status_to_write(body.get("status"), change.status, now, controller.STATUS_REFRESH_SECONDS)
    if status:
        patch.status.update(status)


def build_registry(options: OperatorOptions) -> kopf.OperatorRegistry:
    registry = kopf.OperatorRegistry()

    @kopf.on.startup(registry=registry)
    def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
        # Progress and the last-handled spec live in annotations under our own prefix; nothing
        # is written into status but our figures and conditions.
        settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=GROUP)
        settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
            prefix=GROUP, key="last-handled-configuration"
        )
        settings.persistence.finalizer = f"{GROUP}/operator"
        settings.posting.reporting_component = "pgwork-operator"
        settings.posting.level = logging.WARNING
        settings.execution.max_workers = options.executor_workers
        # A deleted JobQueue keeps its finalizer until a timer round in flight (a database
        # connect can take its timeout) ends; kopf then re-checks after this many seconds
        # (default 60). The timer no longer writes status every round, so no other event wakes it.
        settings.background.cancellation_polling = 1.0
        settings.networking.request_timeout = 30
        settings.watching.server_timeout = 300
        settings.peering.name = options.peering_name
        settings.peering.standalone = options.standalone
        settings.peering.mandatory = not options.standalone
        settings.peering.clusterwide = options.clusterwide
        # Two replicas with equal priority would both stay active; a random one makes exactly
        # one of them win, and the other takes over when the winner's peering record expires.
        settings.peering.priority = options.priority if options.priority is not None else random.randint(1, 2**30)
        if options.namespaces and not options.clusterwide and not any("*" in n for n in options.namespaces):
            settings.scanning.disabled = True  # fixed namespaces: no need to list/watch namespaces
        configuration = (
            configuration_from_kopf(options.connection) if options.connection is not None else default_configuration()
        )
        metrics = OperatorMetrics()
        if options.metrics_port:
            metrics.serve(options.metrics_port)
        agent = USER_AGENT + (f" ({options.identity})" if options.identity else "")
        options.clients = Clients(
            Kube(configuration, user_agent=agent),
            QueueCache(options.queue_factory),
            metrics,
            fixed_clock=options.clock is not None,
        )

    @kopf.on.cleanup(registry=registry)
    def close(**_: Any) -> None:
        if options.clients is not None:
            options.clients.queues.close_all()
            options.clients.kube.close()

    @kopf.on.login(registry=registry)
    def login(**kwargs: Any) -> Any:
        if options.connection is not None:
            return options.connection
        return kopf.login_with_service_account(**kwargs) or kopf.login_with_kubeconfig(**kwargs)

    def clients() -> Clients:
        assert options.clients is not None, "the startup hook sets the clients"
        return options.clients

    @kopf.on.resume(GROUP, VERSION, PLURAL, registry=registry)
    @kopf.on.create(GROUP, VERSION, PLURAL, registry=registry)
    @kopf.on.update(GROUP, VERSION, PLURAL, field="spec", registry=registry)
    def reconcile(body: kopf.Body, patch: kopf.Patch, memo: kopf.Memo, **_: Any) -> None:
        now = time.time()
        try:
            change = controller.reconcile(clients(), body, now)
        except SpecError as exc:
            _post(body, controller.invalid_spec(body, exc, now), patch)
            raise kopf.PermanentError(str(exc)) from None
        except KubeError as exc:
            kopf.event(body, type="Warning", reason="ApplyFailed", message=str(exc)[:1000])
            raise kopf.TemporaryError(f"applying owned objects: {exc}", delay=options.retry_backoff_seconds) from None
        memo[controller.APPLIED] = body.get("metadata", {}).get("generation")
        _post(body, change, patch)

    @kopf.timer(GROUP, VERSION, PLURAL, interval=options.tick_seconds, registry=registry)
    def autoscale(body: kopf.Body, patch: kopf.Patch, memo: kopf.Memo, **_: Any) -> None:
        now = options.clock() if options.clock is not None else time.time()
        change = controller.autoscale(clients(), body, memo, now)
        if change is not None:
            _post(body, change, patch, only_changes=True, now=now)

    @kopf.on.delete(GROUP, VERSION, PLURAL, optional=True, registry=registry)
    def forget(name: str, namespace: str | None, **_: Any) -> None:
        # Owned objects go with their owner (ownerReferences); only our own state is left.
        clients().queues.release((namespace or "", name))
        clients().queues.release(firing.firing_user((namespace or "", name)))
        clients().budgets.forget((namespace or "", name))
        clients().metrics.forget(namespace or "", name)

    return registry


async def run_operator(
    options: OperatorOptions,
    *,
    liveness_endpoint: str | None = None,
    stop_flag: Any = None,
    ready_flag: Any = None,
) -> None:
    """The real kopf operator with our registry, until `stop_flag` is set."""
    await kopf.operator(
        registry=build_registry(options),
        clusterwide=options.clusterwide,
        namespaces=options.namespaces,
        standalone=options.standalone,
        # A peering name makes peering mandatory: the operator waits for its peering object.
        peering_name=None if options.standalone else options.peering_name,
        liveness_endpoint=liveness_endpoint,
        stop_flag=stop_flag,
        ready_flag=ready_flag,
    )
