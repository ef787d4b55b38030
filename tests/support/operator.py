"""The real kopf operator, in-process, against kmock's KubernetesEmulator on a background loop.

Tests talk to the emulator through the same official client the operator uses (with its own
user agent, so the API-call log can tell test requests from the operator's).
"""

from __future__ import annotations

import asyncio
import functools
import gc
import threading
import warnings
from collections.abc import AsyncIterator, Iterator
from typing import Any, TypeVar

import jsonpatch
import kmock
from kubernetes import client as k8s_client

from pgwork.operator.handlers import OperatorOptions, run_operator
from pgwork.operator.kube import Kube, KubeError
from pgwork.operator.permissions import denied, load_rules, required_permissions
from pgwork.operator.spec import GROUP, VERSION
from tests.support.waiting import wait_for

T = TypeVar("T")
TEST_AGENT = "pgwork-tests"

RESOURCES: dict[str, dict[str, Any]] = {
    f"{GROUP}/{VERSION}/jobqueues": {
        "kind": "JobQueue",
        "namespaced": True,
        "subresources": {"status", "scale"},
        "verbs": {"get", "list", "watch", "create", "patch", "update", "delete"},
    },
    "apps/v1/deployments": {"kind": "Deployment", "namespaced": True},
    "batch/v1/cronjobs": {"kind": "CronJob", "namespaced": True},
    "v1/services": {"kind": "Service", "namespaced": True},
    "v1/secrets": {"kind": "Secret", "namespaced": True},
    "v1/pods": {"kind": "Pod", "namespaced": True},
    "v1/events": {"kind": "Event", "namespaced": True},
    "v1/namespaces": {"kind": "Namespace", "namespaced": False},
    "apiextensions.k8s.io/v1/customresourcedefinitions": {"kind": "CustomResourceDefinition", "namespaced": False},
    "kopf.dev/v1/kopfpeerings": {"kind": "KopfPeering", "namespaced": True},
    "kopf.dev/v1/clusterkopfpeerings": {"kind": "ClusterKopfPeering", "namespaced": False},
}


# The operator's objects appear, change and vanish asynchronously: a missing object or field is "not yet".
eventually = functools.partial(wait_for, tolerate=(KubeError, KeyError, IndexError, TypeError, AssertionError))


class _Emulator(kmock.KubernetesEmulator):  # type: ignore[misc]
    """The emulator plus two things a real API server does that kopf relies on: a name from
    `metadata.generateName` (every kopf event has one) and a resourceVersion bumped on each write
    (kopf's JSON-patches test it, and it tells kopf which of its own patches it has seen)."""

    _counter = 0

    def _next(self) -> str:
        type(self)._counter += 1
        return str(type(self)._counter)

    async def _handle(self, request: Any) -> Any:
        method = str(getattr(request.method, "value", request.method)).upper()
        data = request.data
        if request.resource is not None and method == "POST" and isinstance(data, dict):
            meta = data.setdefault("metadata", {})
            if not meta.get("name") and meta.get("generateName"):
                meta["name"] = f"{meta['generateName']}{self._next()}"
            meta["resourceVersion"] = self._next()
        elif request.resource is not None and method == "PATCH" and request.name:
            if isinstance(data, dict):
                data.setdefault("metadata", {})["resourceVersion"] = self._next()
            elif isinstance(data, list):
                data.append({"op": "add", "path": "/metadata/resourceVersion", "value": self._next()})
        try:
            return await super()._handle(request)
        except jsonpatch.JsonPatchTestFailed as exc:
            # A real API server answers 422, which tells kopf to re-read and patch again.
            raise kmock.KubernetesError(status=422, reason="Invalid", message=str(exc)) from None

    async def _serve_list(self, request: Any) -> Any:
        # The list's resourceVersion is where a watch continues from (kmock says "...").
        listing = await super()._serve_list(request)
        listing["metadata"]["resourceVersion"] = str(type(self)._counter)
        return listing

    async def _serve_watch(self, request: Any) -> AsyncIterator[Any]:
        """kmock's watch, made to behave like a real API server's watch from a list's
        resourceVersion: it subscribes to changes before it looks at what exists (kmock did so
        after, losing changes made meanwhile), and it does not resend, as ADDED, objects that did
        not change since that list (kmock resent them all: kopf took the stale copy of a JobQueue it
        had just given its finalizer, its next finalizer patch failed its resourceVersion `test`,
        and, no newer event coming, the JobQueue was never handled)."""
        yield b""
        since = _version(request.params.get("resourceVersion"))
        bus = self._buses[request.resource]
        marker = await bus.mark()
        try:
            async with self._lock:
                objects = [
                    obj
                    for (resource, namespace, name), obj in self._objects.items()
                    if _matches(request, resource, namespace, name) and not obj.deleted and _newer(obj.raw, since)
                ]
                listed = [{"type": "ADDED", "object": obj.raw} for obj in objects]
            for event in listed:
                yield event
            async for event in bus.stream(since=marker):
                meta = (event.get("object") or {}).get("metadata") or {}
                if _matches(request, request.resource, meta.get("namespace"), meta.get("name")):
                    yield event
        finally:
            await bus.unmark(marker)


def _version(value: object) -> int | None:
    return int(value) if isinstance(value, str) and value.isdigit() else None


def _newer(raw: Any, since: int | None) -> bool:
    version = _version((raw.get("metadata") or {}).get("resourceVersion"))
    return since is None or version is None or version > since


def _matches(request: Any, resource: Any, namespace: str | None, name: str | None) -> bool:
    return bool(
        resource == request.resource
        and (request.namespace is None or namespace == request.namespace)
        and (request.name is None or name == request.name)
    )


async def close_stray_sessions() -> None:
    """Close the aiohttp sessions still open on this loop as it ends: kopf can leave one to the
    emulator open after a re-login, and its socket, found later by the garbage collector, raised a
    ResourceWarning (an error here) inside an unrelated test. Closed on their own loop, they leave
    no socket behind, whatever still refers to them."""
    import aiohttp

    loop = asyncio.get_running_loop()
    for obj in gc.get_objects():
        if isinstance(obj, aiohttp.ClientSession) and not obj.closed and getattr(obj, "_loop", None) is loop:
            await obj.close()


def collect_leftovers() -> None:
    """Collect now what a stopped event loop left behind (kopf may leave an aiohttp session to
    the emulator unclosed after a re-login), so its ResourceWarning is not raised, under
    filterwarnings=error, inside whichever later test the garbage collector happens to run in."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        gc.collect()


class Emulator:
    """KubernetesEmulator + its HTTP server, running on an event loop in a daemon thread."""

    def __init__(self) -> None:
        self.kmock: Any = None
        self.url = ""
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._serve()), name="kmock", daemon=True)

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        async with _Emulator() as emulator, kmock.Server(emulator) as server:
            for key, info in RESOURCES.items():
                emulator.resources[key] = kmock.ResourceInfo(**info)
            self.kmock = emulator
            self.url = str(server.url).rstrip("/")
            self._ready.set()
            await self._stop.wait()

    def start(self) -> Emulator:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("kmock did not start within 10s")
        return self

    def stop(self) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)
        collect_leftovers()

    def configuration(self) -> k8s_client.Configuration:
        conf = k8s_client.Configuration()
        conf.host = self.url
        return conf

    def client(self) -> Kube:
        return Kube(self.configuration(), user_agent=TEST_AGENT)

    def operator_calls(self) -> list[dict[str, Any]]:
        """Every API request the operator (kopf or our client) made: verb, group, resource."""
        calls = []
        for request in list(iter(self.kmock)):
            agent = request.headers.get("User-Agent", "")
            if agent.startswith(TEST_AGENT) or request.resource is None or not request.resource.plural:
                continue
            calls.append(
                {
                    "verb": _verb(request),
                    "group": request.resource.group or "",
                    "resource": request.resource.plural + (f"/{request.subresource}" if request.subresource else ""),
                    "namespaced": request.namespace is not None,
                    "agent": agent,
                }
            )
        return calls


def _verb(request: Any) -> str:
    method = str(request.method.value if hasattr(request.method, "value") else request.method).upper()
    if method == "GET":
        if request.params.get("watch") in ("true", "1"):
            return "watch"
        return "get" if request.name else "list"
    return {"POST": "create", "PATCH": "patch", "PUT": "update", "DELETE": "delete"}.get(method, method.lower())


def record_calls(calls: list[dict[str, Any]]) -> None:
    """Check the API calls the operator made in this run against rbac.yaml, when they are made.

    Called at each emulator's teardown, so a call the ClusterRole would refuse fails the run that
    made it (as a teardown error naming the call) instead of being compared with an old record.
    """
    made = sorted({(c["group"], c["resource"], c["verb"]) for c in calls})
    refused = denied(made, load_rules())
    assert not refused, f"the operator made API calls that pgwork/operator/rbac.yaml does not allow: {refused}"
    unlisted = sorted(set(made) - required_permissions())
    assert not unlisted, f"the operator made API calls missing from permissions.required_permissions(): {unlisted}"


class OperatorThread:
    """`run_operator` (real kopf) on its own loop in a thread, like kopf.testing.KopfRunner."""

    def __init__(self, options: OperatorOptions, *, liveness_endpoint: str | None = None) -> None:
        self.options = options
        self.liveness_endpoint = liveness_endpoint
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._main, name="kopf", daemon=True)

    async def _run(self) -> None:
        try:
            await run_operator(
                self.options,
                liveness_endpoint=self.liveness_endpoint,
                stop_flag=self._stop,
                ready_flag=self._ready,
            )
        finally:
            await close_stray_sessions()

    def _main(self) -> None:
        try:
            asyncio.run(self._run())
        except BaseException as exc:
            self.error = exc
            self._ready.set()

    def start(self) -> OperatorThread:
        self._thread.start()
        if not self._ready.wait(20):
            raise RuntimeError("the operator did not become ready within 20s")
        if self.error is not None:
            raise RuntimeError(f"the operator failed to start: {self.error!r}") from self.error
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(20)
        if self._thread.is_alive():
            raise RuntimeError("the operator did not stop within 20s")
        collect_leftovers()


def running(
    emulator: Emulator, options: OperatorOptions, *, liveness_endpoint: str | None = None
) -> Iterator[OperatorThread]:
    """Yields once, with the operator running; stops it when resumed or closed."""
    import kopf

    options.connection = kopf.ConnectionInfo(server=emulator.url, default_namespace="default")
    thread = OperatorThread(options, liveness_endpoint=liveness_endpoint).start()
    try:
        yield thread
    finally:
        thread.stop()
