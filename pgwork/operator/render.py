"""JobQueue → the manifests the operator owns. Pure: dicts in, dicts out, no I/O.

Names are stable (`<jobqueue>-worker`, `-reaper`, `-prune`, `-metrics`) so a re-run finds and
patches the same objects, and every object carries an ownerReference to its JobQueue so
Kubernetes deletes them with it.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from pgwork.operator import podtemplate
from pgwork.operator.spec import API_VERSION, KIND, DatabaseSpec, JobQueueSpec, SecretRef, check_name, parse_spec

Manifest = dict[str, Any]

DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"
JOBQUEUE_LABEL = "pgwork.dev/jobqueue"
COMPONENT_LABEL = "app.kubernetes.io/component"
# The worker's own shutdown budget is the pod's grace period minus this margin, so it releases
# unfinished jobs (back to pending, no lease to wait out) before the kubelet's SIGKILL.
GRACE_MARGIN_SECONDS = 5


def names(jobqueue: str) -> dict[str, str]:
    return {
        "deployment": f"{jobqueue}-worker",
        "reaper": f"{jobqueue}-reaper",
        "prune": f"{jobqueue}-prune",
        "service": f"{jobqueue}-metrics",
    }


def selector_labels(jobqueue: str) -> dict[str, str]:
    return {JOBQUEUE_LABEL: jobqueue, COMPONENT_LABEL: "worker"}


def selector_string(jobqueue: str) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(selector_labels(jobqueue).items()))


def _labels(jobqueue: str, component: str) -> dict[str, str]:
    return {
        "app.kubernetes.io/name": "pgwork",
        "app.kubernetes.io/instance": jobqueue,
        COMPONENT_LABEL: component,
        "app.kubernetes.io/managed-by": "pgwork-operator",
        JOBQUEUE_LABEL: jobqueue,
    }


def owner_reference(body: Mapping[str, Any]) -> dict[str, Any]:
    meta = body.get("metadata", {})
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "name": meta.get("name"),
        "uid": meta.get("uid"),
        "controller": True,
        "blockOwnerDeletion": True,
    }


def _metadata(body: Mapping[str, Any], name: str, component: str) -> dict[str, Any]:
    meta = body.get("metadata", {})
    return {
        "name": name,
        "namespace": meta.get("namespace"),
        "labels": _labels(meta["name"], component),
        "ownerReferences": [owner_reference(body)],
    }


def seconds_flag(value: float) -> str:
    """`value` seconds as a duration flag that parses back to exactly `value`: the shortest
    decimal that round-trips (repr), written without an exponent. `%g` kept six digits, so a
    valid spec (lease 100.0004s, heartbeat 33.33346s) became flags the worker refuses."""
    text = format(Decimal(repr(float(value))), "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return f"{text}s"


def database_env(ref: SecretRef, db: DatabaseSpec, *, listen: bool = False) -> list[dict[str, Any]]:
    """DATABASE_URL from `ref`; behind a transaction-mode pooler PGWORK_POOLER too, and for the
    workers (`listen`) the direct LISTEN connection string when spec.database.listenSecret names one."""
    env: list[dict[str, Any]] = [_secret_env("DATABASE_URL", ref)]
    if db.pooler is not None:
        env.append({"name": "PGWORK_POOLER", "value": db.pooler})
        if listen and db.listen is not None:
            env.append(_secret_env("PGWORK_LISTEN_DSN", db.listen))
    return env


def _secret_env(name: str, ref: SecretRef) -> dict[str, Any]:
    return {"name": name, "valueFrom": {"secretKeyRef": {"name": ref.name, "key": ref.key}}}


def worker_args(spec: JobQueueSpec) -> list[str]:
    if spec.worker.args is not None:
        return list(spec.worker.args)
    grace = max(1, spec.worker.termination_grace_period_seconds - GRACE_MARGIN_SECONDS)
    assert spec.worker.app is not None  # parse_spec requires app when args are absent
    return [
        "worker",
        "--app",
        spec.worker.app,
        "--job-types",
        ",".join(spec.job_types),
        "--concurrency",
        str(spec.worker.concurrency),
        "--lease",
        seconds_flag(spec.lease.duration_seconds),
        "--heartbeat",
        seconds_flag(spec.lease.heartbeat_seconds),
        "--metrics-port",
        str(spec.worker.metrics_port),
        "--grace",
        f"{grace}s",
        # Only when set: the worker's own default holds otherwise, and a JobQueue that never set the
        # field keeps the pod template it had (no rollout of every worker on an operator upgrade).
        *([] if spec.worker.max_abandoned is None else ["--max-abandoned", str(spec.worker.max_abandoned)]),
        # spec.worker's typed flags (batch, isolation, poll, ...), each only when set, for the same reason.
        *spec.worker.flags.args(),
        # The lease owner must equal the pod name for pod-deletion-cost; HOSTNAME is cut at
        # 63 characters, the downward-API name is not.
        "--id",
        "$(POD_NAME)",
    ]


# The image runs as a numeric non-root user and writes nothing but /tmp, so every pod pgwork
# creates can pass the "restricted" Pod Security Standard.
POD_SECURITY: dict[str, Any] = {
    "runAsNonRoot": True,
    "runAsUser": 10001,
    "runAsGroup": 10001,
    "fsGroup": 10001,
    "seccompProfile": {"type": "RuntimeDefault"},
}
CONTAINER_SECURITY: dict[str, Any] = {
    "allowPrivilegeEscalation": False,
    "readOnlyRootFilesystem": True,
    "capabilities": {"drop": ["ALL"]},
}
TMP_VOLUME: dict[str, Any] = {"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}}
TMP_MOUNT: dict[str, Any] = {"name": "tmp", "mountPath": "/tmp"}  # noqa: S108 (a path inside the pod)


def _hardened(container: dict[str, Any], mounts: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {
        **container,
        "securityContext": dict(CONTAINER_SECURITY),
        "volumeMounts": [dict(TMP_MOUNT), *(mounts or [])],
    }


def _hardened_pod(pod_spec: dict[str, Any], volumes: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {**pod_spec, "securityContext": dict(POD_SECURITY), "volumes": volumes or [dict(TMP_VOLUME)]}


def render_deployment(body: Mapping[str, Any], spec: JobQueueSpec, replicas: int | None) -> Manifest:
    """The worker Deployment. `replicas` None leaves the field out (for patches: the scaler owns it)."""
    name = body["metadata"]["name"]
    w = spec.worker
    own_env = {e.get("name") for e in w.env}
    env = [
        *database_env(spec.database.workers, spec.database, listen=True),
        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        # HF_HOME and TORCH_HOME into the model cache, unless worker.env points them elsewhere.
        *[e for e in w.volumes.worker_env() if e["name"] not in own_env],
        *[dict(e) for e in w.env],
    ]
    container: dict[str, Any] = {
        "name": "worker",
        "image": w.image,
        "imagePullPolicy": w.image_pull_policy,
        "command": list(w.command),
        "args": worker_args(spec),
        "env": env,
        "ports": [{"name": "metrics", "containerPort": w.metrics_port, "protocol": "TCP"}],
        "livenessProbe": {
            "httpGet": {"path": "/healthz", "port": "metrics"},
            "periodSeconds": 10,
            "failureThreshold": 3,
        },
        "readinessProbe": {
            "httpGet": {"path": "/readyz", "port": "metrics"},
            "periodSeconds": 5,
            "failureThreshold": 2,
        },
        "resources": dict(w.resources),
    }
    pod_spec: dict[str, Any] = {
        "terminationGracePeriodSeconds": w.termination_grace_period_seconds,
        "containers": [_hardened(container, w.volumes.worker_mounts())],
    }
    if spec.database.migrate:
        # Safe from many pods at once: migrations take an advisory lock and run once. With the
        # schema owner's own Secret, the workers' credentials need no DDL rights.
        pod_spec["initContainers"] = [
            _hardened(
                {
                    "name": "migrate",
                    "image": w.image,
                    "imagePullPolicy": w.image_pull_policy,
                    "command": ["pgwork"],
                    "args": ["migrate"],
                    "env": database_env(spec.database.migrations, spec.database),
                }
            )
        ]
    if w.service_account_name:
        pod_spec["serviceAccountName"] = w.service_account_name
    # Handlers read producers' payloads: the pod holds no namespace token unless the JobQueue asks.
    pod_spec["automountServiceAccountToken"] = w.automount_service_account_token
    pod_spec = _hardened_pod(pod_spec, [w.volumes.scratch_volume(), *w.volumes.worker_volumes()])
    deployment_spec: dict[str, Any] = {
        "selector": {"matchLabels": selector_labels(name)},
        # Surge, never take a busy worker away early: a rollout adds new pods before old ones drain.
        "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 0}},
        # The user's podTemplate goes under the operator's fields: its labels, env and hardening win.
        "template": podtemplate.merge(
            w.pod_template,
            {
                "metadata": {
                    "labels": {**_labels(name, "worker"), **selector_labels(name)},
                    "annotations": {
                        "prometheus.io/scrape": "true",
                        "prometheus.io/port": str(w.metrics_port),
                    },
                },
                "spec": pod_spec,
            },
            CONTAINER_SECURITY,
            (TMP_MOUNT,),
        ),
    }
    if replicas is not None:
        deployment_spec = {"replicas": replicas, **deployment_spec}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _metadata(body, names(name)["deployment"], "worker"),
        "spec": deployment_spec,
    }


def _cronjob(
    body: Mapping[str, Any],
    spec: JobQueueSpec,
    *,
    name: str,
    component: str,
    schedule: str,
    args: list[str],
    suspend: bool,
    deadline_seconds: int,
) -> Manifest:
    return {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": _metadata(body, name, component),
        "spec": {
            "schedule": schedule,
            # A second reaper while one still loops would only double the database work.
            "concurrencyPolicy": "Forbid",
            "suspend": suspend,
            "startingDeadlineSeconds": 60,
            "successfulJobsHistoryLimit": 1,
            "failedJobsHistoryLimit": 3,
            "jobTemplate": {
                "metadata": {"labels": _labels(body["metadata"]["name"], component)},
                "spec": {
                    "backoffLimit": 1,
                    "activeDeadlineSeconds": deadline_seconds,
                    "ttlSecondsAfterFinished": 600,
                    "template": {
                        "metadata": {"labels": _labels(body["metadata"]["name"], component)},
                        "spec": _hardened_pod(
                            {
                                "restartPolicy": "Never",
                                # The reaper and prune never call the Kubernetes API: no token to steal.
                                "automountServiceAccountToken": False,
                                **(
                                    {"serviceAccountName": spec.worker.service_account_name}
                                    if spec.worker.service_account_name
                                    else {}
                                ),
                                "containers": [
                                    _hardened(
                                        {
                                            "name": component,
                                            "image": spec.worker.image,
                                            "imagePullPolicy": spec.worker.image_pull_policy,
                                            "command": ["pgwork"],
                                            "args": args,
                                            "env": database_env(spec.database.maintenance, spec.database),
                                            "resources": {"requests": {"cpu": "10m", "memory": "64Mi"}},
                                        }
                                    )
                                ],
                            }
                        ),
                    },
                },
            },
        },
    }


def render_reaper(body: Mapping[str, Any], spec: JobQueueSpec) -> Manifest:
    r = spec.reaper
    args = ["reap"]
    if r.loop_seconds:
        args += ["--loop-for", seconds_flag(r.loop_seconds), "--every", seconds_flag(r.every_seconds)]
    if spec.retention.archive_after is not None:
        args += ["--archive-after", spec.retention.archive_after]
    return _cronjob(
        body,
        spec,
        name=names(body["metadata"]["name"])["reaper"],
        component="reaper",
        schedule=r.schedule,
        args=args,
        suspend=r.suspend,
        deadline_seconds=int(r.loop_seconds) + 120,
    )


def render_prune(body: Mapping[str, Any], spec: JobQueueSpec) -> Manifest:
    return _cronjob(
        body,
        spec,
        name=names(body["metadata"]["name"])["prune"],
        component="retention",
        schedule=spec.retention.schedule,
        # With archiving, history lives in pgwork.job_history by day: retention drops whole days.
        args=[
            "prune" if spec.retention.archive_after is None else "drop-history",
            "--older-than",
            spec.retention.older_than,
        ],
        suspend=not spec.retention.enabled,
        deadline_seconds=3600,
    )


def render_service(body: Mapping[str, Any], spec: JobQueueSpec) -> Manifest:
    name = body["metadata"]["name"]
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _metadata(body, names(name)["service"], "metrics"),
        "spec": {
            "type": "ClusterIP",
            "selector": selector_labels(name),
            "ports": [
                {"name": "metrics", "port": spec.worker.metrics_port, "targetPort": "metrics", "protocol": "TCP"}
            ],
        },
    }


def render_all(body: Mapping[str, Any], replicas: int | None = None) -> list[Manifest]:
    """Every owned object for a JobQueue body (metadata + spec). Raises SpecError on a bad spec."""
    check_name(body.get("metadata", {}).get("name"))
    spec = parse_spec(body.get("spec"))
    return [
        render_deployment(body, spec, replicas),
        render_reaper(body, spec),
        render_prune(body, spec),
        render_service(body, spec),
    ]


def initial_replicas(spec: JobQueueSpec) -> int:
    """Replicas for a newly created Deployment, before the first backlog reading."""
    if spec.replicas is not None:
        return min(max(spec.replicas, spec.scaling.min_replicas), spec.scaling.max_replicas)
    return spec.scaling.min_replicas
