"""Helpers shared by the emulator tests and the e2e module: the same requests either way."""

from __future__ import annotations

import base64
import uuid
from typing import Any

from pgwork.operator.kube import Kube
from pgwork.operator.spec import API_VERSION, GROUP, PLURAL, VERSION

IMAGE = "registry.example/pgwork-worker:1.0"


def jobqueues_path(namespace: str, name: str | None = None) -> str:
    path = f"/apis/{GROUP}/{VERSION}/namespaces/{namespace}/{PLURAL}"
    return f"{path}/{name}" if name else path


def create_namespace(client: Kube, namespace: str) -> None:
    client.request(
        "POST", "/api/v1/namespaces", body={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
    )


def create_secret(client: Kube, namespace: str, name: str, dsn: str | bytes, key: str = "dsn") -> None:
    raw = dsn if isinstance(dsn, bytes) else dsn.encode()
    client.request(
        "POST",
        f"/api/v1/namespaces/{namespace}/secrets",
        body={
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": name, "namespace": namespace},
            "type": "Opaque",
            "data": {key: base64.b64encode(raw).decode()},
        },
    )


def set_secret(client: Kube, namespace: str, name: str, dsn: str, key: str = "dsn") -> None:
    client.request(
        "PATCH",
        f"/api/v1/namespaces/{namespace}/secrets/{name}",
        body={"data": {key: base64.b64encode(dsn.encode()).decode()}},
        content_type="application/merge-patch+json",
    )


def spec(**overrides: Any) -> dict[str, Any]:
    """A small JobQueue spec with fast polling, for tests."""
    base: dict[str, Any] = {
        "database": {"secretName": "queue-db", "migrate": True},
        "jobTypes": ["ocr", "extract"],
        "worker": {"image": IMAGE, "app": "myapp.jobs", "concurrency": 2, "terminationGracePeriodSeconds": 90},
        "scaling": {
            "minReplicas": 1,
            "maxReplicas": 8,
            "targetBacklogPerWorker": 5,
            "scaleDownStabilizationSeconds": 1.5,
            "pollIntervalSeconds": 0.2,
        },
        "lease": {"durationSeconds": 30, "heartbeatSeconds": 10},
        "reaper": {"schedule": "* * * * *", "loopSeconds": 50, "everySeconds": 10},
    }
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            base[key] = {**base[key], **value}
        else:
            base[key] = value
    return base


def create_jobqueue(
    client: Kube, namespace: str, name: str, body_spec: dict[str, Any], *, emulated: bool = True
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "namespace": namespace}
    if emulated:
        # What a real API server fills in itself; the emulator keeps whatever it is given.
        metadata.update({"uid": str(uuid.uuid4()), "generation": 1})
    return client.request(
        "POST",
        jobqueues_path(namespace),
        body={"apiVersion": API_VERSION, "kind": "JobQueue", "metadata": metadata, "spec": body_spec},
    )


def patch_jobqueue(client: Kube, namespace: str, name: str, patch: dict[str, Any]) -> dict[str, Any]:
    return client.request(
        "PATCH", jobqueues_path(namespace, name), body=patch, content_type="application/merge-patch+json"
    )


def jobqueue(client: Kube, namespace: str, name: str) -> dict[str, Any]:
    return client.request("GET", jobqueues_path(namespace, name))


def condition(body: dict[str, Any], type_: str) -> dict[str, Any] | None:
    for c in (body.get("status") or {}).get("conditions") or []:
        if c.get("type") == type_:
            return dict(c)
    return None


def deployment(client: Kube, namespace: str, name: str) -> dict[str, Any] | None:
    return client.get("Deployment", namespace, f"{name}-worker")


def replicas(client: Kube, namespace: str, name: str) -> int | None:
    d = deployment(client, namespace, name)
    return None if d is None else int(d["spec"].get("replicas", 1))


def events(client: Kube, namespace: str, name: str) -> list[dict[str, Any]]:
    items = client.request("GET", f"/api/v1/namespaces/{namespace}/events").get("items") or []
    return [e for e in items if (e.get("involvedObject") or {}).get("name") == name]


def event_reasons(client: Kube, namespace: str, name: str) -> list[str]:
    return [str(e.get("reason")) for e in events(client, namespace, name)]


def create_pod(client: Kube, namespace: str, jobqueue_name: str, pod_name: str) -> None:
    """A worker pod as the ReplicaSet would make it (the emulator has no controllers)."""
    client.request(
        "POST",
        f"/api/v1/namespaces/{namespace}/pods",
        body={
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": pod_name,
                "namespace": namespace,
                "labels": {"pgwork.dev/jobqueue": jobqueue_name, "app.kubernetes.io/component": "worker"},
            },
            "spec": {"containers": [{"name": "worker", "image": IMAGE}]},
        },
    )


def pod_annotations(client: Kube, namespace: str, pod_name: str) -> dict[str, str]:
    pod = client.get("Pod", namespace, pod_name)
    assert pod is not None
    return dict((pod.get("metadata") or {}).get("annotations") or {})
