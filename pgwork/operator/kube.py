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

from pgwork.operator.kubenames import is_dns1123_label, is_dns1123_subdomain
from pgwork.version import __version__

FIELD_MANAGER = "pgwork-operator"
REQUEST_TIMEOUT = 10.0
USER_AGENT = f"pgwork-operator/{__version__}"

# kind → (API path prefix, plural); all namespaced. Secrets are not here: they are read only by
# `read_secret`, the typed client call.
RESOURCES: dict[str, tuple[str, str]] = {
    "Deployment": ("/apis/apps/v1", "deployments"),
    "CronJob": ("/apis/batch/v1", "cronjobs"),
    "Service": ("/api/v1", "services"),
    "Pod": ("/api/v1", "pods"),
}


class KubeError(Exception):
    """A non-2xx answer from the API server, or no answer at all."""

    def __init__(self, status: int, reason: str, message: str) -> None:
        self.status = status
        self.reason = reason
        super().__init__(f"{status} {reason}: {message}")


class UnsafeName(ValueError):
    """A namespace or object name that is not a valid Kubernetes name: refused before any request,
    so no caller can make a path such as `../../kube-system/secrets/x` reach another namespace."""


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


def _segment(value: str, what: str, valid: bool) -> str:
    if not valid:
        # The value itself is not repeated: it may be anything a JobQueue's author wrote.
        raise UnsafeName(f"{what} is not a valid Kubernetes name; refusing to build an API path from it")
    # Valid names hold no `/`, `%` or `.`-only segments; quoting with nothing kept safe is a second wall.
    return quote(value, safe="")


def _path(kind: str, namespace: str, name: str | None = None) -> str:
    """The API path for a namespaced object. Every segment must be a valid Kubernetes name."""
    prefix, plural = RESOURCES[kind]
    path = f"{prefix}/namespaces/{_segment(namespace, 'namespace', is_dns1123_label(namespace))}/{plural}"
    if name is None:
        return path
    return f"{path}/{_segment(name, f'{kind} name', is_dns1123_subdomain(name))}"


def _api_message(body: object) -> str:
    """The `message` of a Status answer, else its first 500 characters (never a whole object)."""
    text = body.decode(errors="replace") if isinstance(body, bytes) else str(body or "")
    try:
        parsed = json.loads(text)
    except ValueError:
        return text[:500]
    return str(parsed.get("message") or text[:500]) if isinstance(parsed, dict) else text[:500]


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
            raise KubeError(exc.status or 0, str(exc.reason or "ApiException"), _api_message(exc.body)) from None
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

    def read_secret(self, namespace: str, name: str) -> k8s_client.V1Secret | None:
        """One Secret in `namespace`, by the typed client call (which encodes its path parameters);
        None when it does not exist. Names are checked first, as in every other path."""
        _segment(namespace, "namespace", is_dns1123_label(namespace))
        _segment(name, "Secret name", is_dns1123_subdomain(name))
        try:
            return k8s_client.CoreV1Api(self.api).read_namespaced_secret(name, namespace, _request_timeout=self.timeout)
        except k8s_client.ApiException as exc:
            if exc.status == 404:
                return None
            raise KubeError(exc.status or 0, str(exc.reason or "ApiException"), _api_message(exc.body)) from None
        except Exception as exc:  # urllib3 connection errors and the like
            raise KubeError(0, type(exc).__name__, str(exc)) from None

    def read_secret_bytes(self, namespace: str, name: str, key: str) -> bytes | None:
        """The decoded bytes under `key`, or None when the Secret or its key is missing."""
        secret = self.read_secret(namespace, name)
        if secret is None:
            return None
        if secret.string_data and key in secret.string_data:  # only ever seen on emulators, never stored
            return str(secret.string_data[key]).encode()
        raw = (secret.data or {}).get(key)
        if raw is None:
            return None
        try:
            return base64.b64decode(raw, validate=True)
        except ValueError:
            raise KubeError(0, "InvalidSecretData", f"Secret {name} key {key!r} is not base64") from None

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
