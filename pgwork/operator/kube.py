"""The operator's edge to the Kubernetes API, through the official `kubernetes` client.

Objects go through as plain dicts (the same dicts render.py builds), so what the operator
sends is exactly what the tests and the RBAC file see: one small `request` and named helpers.
Configured in-cluster, from a kubeconfig, or from the ConnectionInfo kopf logged in with.
"""

from __future__ import annotations

import base64
import json
import os
import tempfile
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from kubernetes import client as k8s_client
from kubernetes import config as k8s_config

from pgwork.version import __version__

FIELD_MANAGER = "pgwork-operator"
REQUEST_TIMEOUT = 10.0
USER_AGENT = f"pgwork-operator/{__version__}"

# kind → (API path prefix, plural); all namespaced.
RESOURCES: dict[str, tuple[str, str]] = {
    "Deployment": ("/apis/apps/v1", "deployments"),
    "CronJob": ("/apis/batch/v1", "cronjobs"),
    "Service": ("/api/v1", "services"),
    "Secret": ("/api/v1", "secrets"),
    "Pod": ("/api/v1", "pods"),
}


class KubeError(Exception):
    """A non-2xx answer from the API server, or no answer at all."""

    def __init__(self, status: int, reason: str, message: str) -> None:
        self.status = status
        self.reason = reason
        super().__init__(f"{status} {reason}: {message}")


def _materialise(data: str | bytes | None, suffix: str) -> str | None:
    """The official client wants files for client certificates; kopf may hold the bytes."""
    if data is None:
        return None
    raw = data.encode() if isinstance(data, str) else data
    if not raw.lstrip().startswith(b"-----"):
        raw = base64.b64decode(raw)  # kubeconfig *-data fields are base64
    fd, path = tempfile.mkstemp(prefix="pgwork-operator-", suffix=suffix)
    with os.fdopen(fd, "wb") as fh:
        fh.write(raw)
    return path


def configuration_from_kopf(info: Any) -> k8s_client.Configuration:
    """An official-client Configuration from a `kopf.ConnectionInfo` (same credentials as kopf)."""
    conf = k8s_client.Configuration()
    conf.host = info.server.rstrip("/")
    if info.ca_path:
        conf.ssl_ca_cert = os.fsdecode(info.ca_path)
    elif info.ca_data:
        conf.ssl_ca_cert = _materialise(info.ca_data, ".crt")
    conf.verify_ssl = not info.insecure
    if info.token:
        conf.api_key = {"authorization": f"{info.scheme or 'Bearer'} {info.token}"}
    elif info.username and info.password:
        conf.username = info.username
        conf.password = info.password
    if info.certificate_path:
        conf.cert_file = os.fsdecode(info.certificate_path)
    elif info.certificate_data:
        conf.cert_file = _materialise(info.certificate_data, ".crt")
    if info.private_key_path:
        conf.key_file = os.fsdecode(info.private_key_path)
    elif info.private_key_data:
        conf.key_file = _materialise(info.private_key_data, ".key")
    if info.proxy_url:
        conf.proxy = info.proxy_url
    return conf


def default_configuration() -> k8s_client.Configuration:
    """In-cluster service account first, then the kubeconfig (KUBECONFIG or ~/.kube/config)."""
    conf = k8s_client.Configuration()
    try:
        k8s_config.load_incluster_config(client_configuration=conf)  # type: ignore[no-untyped-call]
    except k8s_config.ConfigException:
        k8s_config.load_kube_config(client_configuration=conf)  # type: ignore[no-untyped-call]
    return conf


def _path(kind: str, namespace: str, name: str | None = None) -> str:
    prefix, plural = RESOURCES[kind]
    path = f"{prefix}/namespaces/{quote(namespace)}/{plural}"
    return f"{path}/{quote(name)}" if name else path


class Kube:
    """Blocking calls (the operator's handlers run them in kopf's thread pool)."""

    def __init__(
        self, configuration: k8s_client.Configuration, *, timeout: float = REQUEST_TIMEOUT, user_agent: str = USER_AGENT
    ) -> None:
        self.api = k8s_client.ApiClient(configuration)
        self.api.user_agent = user_agent
        self.timeout = timeout

    def close(self) -> None:
        self.api.close()  # type: ignore[no-untyped-call]

    def request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        query: Mapping[str, str] | None = None,
        content_type: str = "application/json",
    ) -> dict[str, Any]:
        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = content_type
        _, url, headers, serialized, _ = self.api.param_serialize(
            method=method,
            resource_path=path,
            query_params=list((query or {}).items()),
            header_params=headers,
            body=body,
            auth_settings=["BearerToken"],
        )
        try:
            response = self.api.call_api(
                method, url, header_params=headers, body=serialized, _request_timeout=self.timeout
            )
            response.read()  # type: ignore[no-untyped-call]
        except k8s_client.ApiException as exc:
            raise KubeError(exc.status or 0, str(exc.reason or "ApiException"), str(exc.body or "")) from None
        except Exception as exc:  # urllib3 connection errors and the like
            raise KubeError(0, type(exc).__name__, str(exc)) from None
        text = response.data.decode() if response.data else ""
        parsed: Any = json.loads(text) if text.strip().startswith("{") else {}
        if response.status >= 400:
            message = parsed.get("message") if isinstance(parsed, dict) else None
            raise KubeError(response.status, str(response.reason or ""), str(message or text[:500]))
        return parsed if isinstance(parsed, dict) else {}

    def get(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            return self.request("GET", _path(kind, namespace, name))
        except KubeError as exc:
            if exc.status == 404:
                return None
            raise

    def apply(self, manifest: Mapping[str, Any], *, create_extra: Mapping[str, Any] | None = None) -> str:
        """Create the object, or server-side-apply it so a re-run converges. Returns the verb done.

        `create_extra` adds spec fields only on creation (the worker count, which the scaler
        owns afterwards and a re-apply must not reset).
        """
        kind = str(manifest["kind"])
        meta = manifest["metadata"]
        namespace, name = meta["namespace"], meta["name"]
        if self.get(kind, namespace, name) is None:
            body = json.loads(json.dumps(manifest))
            if create_extra:
                body["spec"] = {**create_extra, **body["spec"]}
            try:
                self.request("POST", _path(kind, namespace), body=body, query={"fieldManager": FIELD_MANAGER})
                return "created"
            except KubeError as exc:
                if exc.status != 409:  # someone else created it meanwhile: apply instead
                    raise
        self.request(
            "PATCH",
            _path(kind, namespace, name),
            body=dict(manifest),
            query={"fieldManager": FIELD_MANAGER, "force": "true"},
            content_type="application/apply-patch+yaml",
        )
        return "patched"

    def read_secret_value(self, namespace: str, name: str, key: str) -> str | None:
        """The decoded value, or None when the Secret or its key is missing."""
        secret = self.get("Secret", namespace, name)
        if secret is None:
            return None
        if key in (secret.get("stringData") or {}):  # only ever seen on emulators, never stored
            return str(secret["stringData"][key])
        raw = (secret.get("data") or {}).get(key)
        return base64.b64decode(raw).decode() if raw is not None else None

    def secret_exists(self, namespace: str, name: str) -> bool:
        return self.get("Secret", namespace, name) is not None

    def deployment_replicas(self, namespace: str, name: str) -> int | None:
        deployment = self.get("Deployment", namespace, name)
        if deployment is None:
            return None
        return int((deployment.get("spec") or {}).get("replicas", 1))

    def scale_deployment(self, namespace: str, name: str, replicas: int) -> None:
        self.request(
            "PATCH",
            _path("Deployment", namespace, name),
            body={"spec": {"replicas": replicas}},
            query={"fieldManager": f"{FIELD_MANAGER}-scaler"},
            content_type="application/merge-patch+json",
        )

    def list_pods(self, namespace: str, selector: str) -> list[dict[str, Any]]:
        answer = self.request("GET", _path("Pod", namespace), query={"labelSelector": selector})
        return list(answer.get("items") or [])

    def annotate_pod(self, namespace: str, name: str, annotations: Mapping[str, str]) -> None:
        self.request(
            "PATCH",
            _path("Pod", namespace, name),
            body={"metadata": {"annotations": dict(annotations)}},
            query={"fieldManager": f"{FIELD_MANAGER}-scaler"},
            content_type="application/merge-patch+json",
        )
