"""The real kopf operator against kmock's KubernetesEmulator and a real PostgreSQL.

The emulator has no controllers: these tests prove what the operator asks of the API (objects,
replicas, annotations, status, events), not what Kubernetes then does with it.
"""

from __future__ import annotations

from typing import Any

import pytest

from pgwork.db import Queue
from pgwork.models import NewJob
from pgwork.operator.kube import Kube
from pgwork.operator.permissions import denied, load_rules
from pgwork.operator.render import DELETION_COST
from tests.support import stories
from tests.support.operator import Emulator, OperatorThread, eventually
from tests.support.waiting import stays

pytestmark = pytest.mark.slow


def test_creates_owned_objects(operator: OperatorThread, client: Kube, namespace: str, dsn: str) -> None:
    stories.create_secret(client, namespace, "queue-db", dsn)
    created = stories.create_jobqueue(client, namespace, "ocr", stories.spec())
    uid = created["metadata"]["uid"]

    deployment = eventually(lambda: stories.deployment(client, namespace, "ocr"), what="the worker Deployment")
    reaper = eventually(lambda: client.get("CronJob", namespace, "ocr-reaper"), what="the reaper CronJob")
    prune = eventually(lambda: client.get("CronJob", namespace, "ocr-prune"), what="the retention CronJob")
    service = eventually(lambda: client.get("Service", namespace, "ocr-metrics"), what="the metrics Service")

    for obj in (deployment, reaper, prune, service):
        (owner,) = obj["metadata"]["ownerReferences"]
        assert owner["uid"] == uid and owner["kind"] == "JobQueue" and owner["controller"] is True
    assert deployment["spec"]["replicas"] == 1
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["image"] == stories.IMAGE
    assert {"name": "DATABASE_URL", "valueFrom": {"secretKeyRef": {"name": "queue-db", "key": "dsn"}}} in container[
        "env"
    ]
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert pod["terminationGracePeriodSeconds"] == 90
    assert container["args"][container["args"].index("--grace") + 1] == "85s"
    assert "--max-abandoned" not in container["args"]  # unset: the worker's own default
    assert container["args"][container["args"].index("--job-types") + 1] == "ocr,extract"
    assert reaper["spec"]["concurrencyPolicy"] == "Forbid"
    reap_args = reaper["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["args"]
    assert reap_args == ["reap", "--loop-for", "50s", "--every", "10s"]
    assert service["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]

    body = eventually(
        lambda: (
            (b := stories.jobqueue(client, namespace, "ocr"))
            and (stories.condition(b, "DatabaseReachable") or {}).get("status") == "True"
            and b
        ),
        what="DatabaseReachable=True",
    )
    assert stories.condition(body, "Ready")["status"] == "True"
    assert body["status"]["pending"] == 0 and body["status"]["replicas"] == 1
    assert body["status"]["selector"] == "app.kubernetes.io/component=worker,pgwork.dev/jobqueue=ocr"


def test_each_role_reads_its_own_secret_and_the_operator_only_the_default(
    operator: OperatorThread, client: Kube, emulator: Emulator, namespace: str, dsn: str
) -> None:
    stories.create_secret(client, namespace, "queue-db", dsn)  # the operator's reads (a reader role)
    database = {
        "secretName": "queue-db",
        "migrationsSecret": {"name": "queue-owner"},
        "workersSecret": {"name": "queue-worker", "key": "url"},
        "maintenanceSecret": {"name": "queue-maintainer"},
    }
    stories.create_jobqueue(client, namespace, "ocr", stories.spec(database=database))
    eventually(
        lambda: (
            (stories.condition(stories.jobqueue(client, namespace, "ocr"), "DatabaseReachable") or {}).get("status")
            == "True"
        ),
        what="DatabaseReachable=True with only the default Secret present",
    )
    deployment = stories.deployment(client, namespace, "ocr")
    assert deployment is not None
    pod = deployment["spec"]["template"]["spec"]

    def secret_of(container: dict[str, Any]) -> dict[str, str]:
        (env,) = [e for e in container["env"] if e["name"] == "DATABASE_URL"]
        return dict(env["valueFrom"]["secretKeyRef"])

    assert secret_of(pod["initContainers"][0]) == {"name": "queue-owner", "key": "dsn"}
    assert secret_of(pod["containers"][0]) == {"name": "queue-worker", "key": "url"}
    for cronjob in ("ocr-reaper", "ocr-prune"):
        obj = client.get("CronJob", namespace, cronjob)
        assert obj is not None
        job_pod = obj["spec"]["jobTemplate"]["spec"]["template"]["spec"]
        assert secret_of(job_pod["containers"][0]) == {"name": "queue-maintainer", "key": "dsn"}
        assert job_pod["automountServiceAccountToken"] is False
    # The operator itself read only the default Secret, and only in this namespace.
    reads = {
        (r.namespace, r.name)
        for r in list(iter(emulator.kmock))
        if r.resource is not None
        and r.resource.plural == "secrets"
        and not r.headers.get("User-Agent", "").startswith("pgwork-tests")
    }
    assert {name for ns, name in reads if ns == namespace} == {"queue-db"}


def _ready_jobqueue(client: Kube, namespace: str, name: str, dsn: str, **overrides: object) -> None:
    stories.create_secret(client, namespace, "queue-db", dsn)
    stories.create_jobqueue(client, namespace, name, stories.spec(**overrides))
    eventually(
        lambda: (
            (stories.condition(stories.jobqueue(client, namespace, name), "DatabaseReachable") or {}).get("status")
            == "True"
        ),
        what="DatabaseReachable=True",
    )


def _enqueue(queue: Queue, count: int, job_type: str = "ocr") -> None:
    queue.enqueue_many([NewJob(job_type, {"n": i}) for i in range(count)])


def _drain(queue: Queue, owner: str = "someone-else") -> None:
    for job in queue.claim(owner, limit=1000):
        queue.succeed(job.lease, {"ok": True})


@pytest.mark.parametrize(
    ("target", "maximum", "expected", "pending", "lower_bounds"),
    [
        (5, 8, 8, 50, []),  # ceil(50/5) = 10, bounded by max 8
        (20, 8, 3, 50, []),  # ceil(50/20) = 3
        # Counts stop at 3 x 2 + 1 = 7 per type (30 ocr, 20 extract): at least 14, max replicas.
        (2, 3, 3, 14, ["pending"]),
    ],
)
def test_scales_up_on_backlog_then_down_after_the_window(
    operator: OperatorThread,
    client: Kube,
    namespace: str,
    queue: Queue,
    dsn: str,
    target: int,
    maximum: int,
    expected: int,
    pending: int,
    lower_bounds: list[str],
) -> None:
    _ready_jobqueue(client, namespace, "ocr", dsn, scaling={"targetBacklogPerWorker": target, "maxReplicas": maximum})
    assert stories.replicas(client, namespace, "ocr") == 1

    # One statement for the whole backlog: a scaling round landing between separate enqueues
    # would count only the first type (7 of 14 with the cap) and still reach `expected` replicas.
    backlog = [("ocr", 30), ("extract", 20), ("not-ours", 40)]  # not-ours: another queue's type, must not count
    queue.enqueue_many([NewJob(job_type, {"n": i}) for job_type, count in backlog for i in range(count)])
    eventually(lambda: stories.replicas(client, namespace, "ocr") == expected, what=f"replicas {expected}")
    # The status patch lands just after the replicas patch of the same round.
    body = eventually(
        lambda: (b := stories.jobqueue(client, namespace, "ocr")) and b["status"].get("lastScaleTime") and b,
        what="the status of the scaling round",
    )
    assert body["status"]["pending"] == pending
    assert (body["status"]["lowerBounds"], body["status"]["countCap"]) == (lower_bounds, maximum * target + 1)
    assert body["status"]["desiredReplicas"] == expected
    assert stories.condition(body, "Scaling")["reason"] in ("ScaledUp", "Steady")
    eventually(lambda: "ScaledUp" in stories.event_reasons(client, namespace, "ocr"), what="a ScaledUp event")

    for job in queue.claim("w-1", job_types=["ocr", "extract"], limit=1000):
        queue.succeed(job.lease, {"ok": True})
    # Held while the stabilization window (1.5s in these tests) runs...
    held = eventually(
        lambda: (
            (b := stories.jobqueue(client, namespace, "ocr"))
            and (stories.condition(b, "Scaling") or {}).get("reason") == "Stabilizing"
            and b
        ),
        what="Stabilizing",
    )
    assert held["status"]["replicas"] == expected
    # ...then down to the minimum.
    eventually(lambda: stories.replicas(client, namespace, "ocr") == 1, what="replicas back to 1")
    assert "ScaledDown" in eventually(
        lambda: (
            "ScaledDown" in stories.event_reasons(client, namespace, "ocr")
            and stories.event_reasons(client, namespace, "ocr")
        ),
        what="a ScaledDown event",
    )


def test_busy_pods_get_the_higher_deletion_cost(
    operator: OperatorThread, client: Kube, namespace: str, queue: Queue, dsn: str
) -> None:
    _ready_jobqueue(client, namespace, "ocr", dsn, scaling={"minReplicas": 0, "targetBacklogPerWorker": 2})
    pods = ["ocr-worker-7d9f-a", "ocr-worker-7d9f-b", "ocr-worker-7d9f-c"]
    for pod in pods:
        stories.create_pod(client, namespace, "ocr", pod)
    stories.create_pod(client, namespace, "other", "other-worker-x")  # another queue's pod: left alone
    _enqueue(queue, 6)
    eventually(lambda: stories.replicas(client, namespace, "ocr") == 3, what="replicas 3")

    # The middle pod holds two jobs; the backlog left is what it holds.
    for job in queue.claim(pods[1], limit=2):
        assert job.lease.owner == pods[1]
    _drain(queue)
    eventually(lambda: stories.replicas(client, namespace, "ocr") == 1, what="replicas 1 (2 running / target 2)")

    costs = {pod: stories.pod_annotations(client, namespace, pod).get(DELETION_COST) for pod in pods}
    assert costs == {pods[0]: "0", pods[1]: "200", pods[2]: "0"}
    assert DELETION_COST not in stories.pod_annotations(client, namespace, "other-worker-x")
    (event,) = eventually(
        lambda: [e for e in stories.events(client, namespace, "ocr") if e["reason"] == "ScaledDown"],
        what="the ScaledDown event",
    )
    assert "1 of 3 pods busy" in event["message"]


@pytest.mark.parametrize(
    ("secret_dsn", "reason"),
    [
        ("postgresql://postgres@127.0.0.1:1/nowhere?connect_timeout=2", "Unreachable"),
        ("not a dsn at all", "InvalidDSN"),
        (None, "SecretMissing"),
    ],
)
def test_database_trouble_leaves_replicas_alone(
    operator: OperatorThread,
    client: Kube,
    namespace: str,
    queue: Queue,
    dsn: str,
    secret_dsn: str | None,
    reason: str,
) -> None:
    _ready_jobqueue(client, namespace, "ocr", dsn)
    _enqueue(queue, 15)
    eventually(lambda: stories.replicas(client, namespace, "ocr") == 3, what="replicas 3")
    _drain(queue)  # the backlog is gone, but the operator can no longer see that
    if secret_dsn is None:
        client.request("DELETE", f"/api/v1/namespaces/{namespace}/secrets/queue-db")
    else:
        stories.set_secret(client, namespace, "queue-db", secret_dsn)

    body = eventually(
        lambda: (
            (b := stories.jobqueue(client, namespace, "ocr"))
            and (stories.condition(b, "DatabaseReachable") or {}).get("status") == "False"
            and b
        ),
        what="DatabaseReachable=False",
    )
    db = stories.condition(body, "DatabaseReachable")
    assert db["reason"] == reason
    # The value is not repeated (a value that is no DSN is secret as a whole); the expected shape is.
    assert secret_dsn is None or secret_dsn not in db["message"]
    if reason == "InvalidDSN":
        assert "Secret " + namespace + "/queue-db key 'dsn'" in db["message"] and "postgresql://USER" in db["message"]
    assert stories.condition(body, "Ready")["status"] == "False"
    assert "replicas left at 3" in stories.condition(body, "Scaling")["message"]
    eventually(lambda: reason in stories.event_reasons(client, namespace, "ocr"), what=f"a {reason} event")
    # Longer than the stabilization window: still no scale-down.
    stays(lambda: stories.replicas(client, namespace, "ocr") == 3, duration=2.0, what="replicas left at 3")

    # Fixed: it reconnects and scales on the true (empty) backlog again.
    if secret_dsn is None:
        stories.create_secret(client, namespace, "queue-db", dsn)
    else:
        stories.set_secret(client, namespace, "queue-db", dsn)
    eventually(
        lambda: (
            (stories.condition(stories.jobqueue(client, namespace, "ocr"), "DatabaseReachable") or {}).get("status")
            == "True"
        ),
        what="DatabaseReachable=True again",
    )
    eventually(lambda: stories.replicas(client, namespace, "ocr") == 1, what="replicas 1 after recovery")


def test_not_migrated_database_is_reported(
    operator: OperatorThread, client: Kube, namespace: str, empty_dsn: str
) -> None:
    stories.create_secret(client, namespace, "queue-db", empty_dsn)
    stories.create_jobqueue(client, namespace, "ocr", stories.spec())
    body = eventually(
        lambda: (
            (b := stories.jobqueue(client, namespace, "ocr"))
            and (stories.condition(b, "DatabaseReachable") or {}).get("status") == "False"
            and b
        ),
        what="DatabaseReachable=False",
    )
    db = stories.condition(body, "DatabaseReachable")
    assert db["reason"] == "NotMigrated" and "pgwork migrate" in db["message"]


def test_spec_change_patches_the_deployment(
    operator: OperatorThread, client: Kube, namespace: str, queue: Queue, dsn: str
) -> None:
    _ready_jobqueue(client, namespace, "ocr", dsn)
    _enqueue(queue, 30)
    eventually(lambda: stories.replicas(client, namespace, "ocr") == 6, what="replicas 6")

    stories.patch_jobqueue(
        client,
        namespace,
        "ocr",
        {
            "spec": {
                "worker": {"image": "registry.example/pgwork-worker:2.0", "maxAbandoned": 7},
                "scaling": {"maxReplicas": 4},
            }
        },
    )
    eventually(
        lambda: (
            stories.deployment(client, namespace, "ocr")["spec"]["template"]["spec"]["containers"][0]["image"]
            == "registry.example/pgwork-worker:2.0"
        ),
        what="the new image",
    )
    args = stories.deployment(client, namespace, "ocr")["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[args.index("--max-abandoned") + 1] == "7"
    eventually(lambda: stories.replicas(client, namespace, "ocr") == 4, what="replicas cut to the new max 4")
    cron = client.get("CronJob", namespace, "ocr-reaper")
    assert cron is not None
    assert cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["image"].endswith(":2.0")


@pytest.mark.parametrize(
    ("override", "field"),
    [
        ({"scaling": {"minReplicas": 5, "maxReplicas": 2}}, "spec.scaling.minReplicas"),
        ({"lease": {"durationSeconds": 20, "heartbeatSeconds": 10}}, "spec.lease.heartbeatSeconds"),
        ({"reaper": {"schedule": "*/5 * * *"}}, "spec.reaper.schedule"),
        ({"database": {"secretName": "x", "dsn": "postgresql://u:secret@h/db"}}, "spec.database"),
        ({"worker": {"maxAbandoned": 1001}}, "spec.worker.maxAbandoned"),
    ],
)
def test_invalid_spec_is_a_permanent_error_naming_the_field(
    operator: OperatorThread, client: Kube, namespace: str, override: dict[str, object], field: str
) -> None:
    stories.create_jobqueue(client, namespace, "bad", stories.spec(**override))
    body = eventually(
        lambda: (
            (b := stories.jobqueue(client, namespace, "bad"))
            and (stories.condition(b, "Ready") or {}).get("reason") == "InvalidSpec"
            and b
        ),
        what="Ready=False InvalidSpec",
    )
    ready = stories.condition(body, "Ready")
    assert ready["status"] == "False" and ready["message"].startswith(field + ":")
    assert "secret@" not in ready["message"]
    eventually(lambda: "InvalidSpec" in stories.event_reasons(client, namespace, "bad"), what="an InvalidSpec event")
    stays(lambda: stories.deployment(client, namespace, "bad") is None, duration=0.5, what="no Deployment")


def test_every_call_so_far_is_allowed_by_rbac(operator: OperatorThread, emulator: Emulator) -> None:
    calls = [(c["group"], c["resource"], c["verb"]) for c in emulator.operator_calls()]
    assert {("apps", "deployments", "patch"), ("", "pods", "patch"), ("", "events", "create")} <= set(calls)
    assert denied(calls, load_rules()) == []


def test_scale_subresource_replicas_are_followed_within_bounds(
    operator: OperatorThread, client: Kube, namespace: str, dsn: str
) -> None:
    _ready_jobqueue(client, namespace, "ocr", dsn)
    # What `kubectl scale jobqueue/ocr --replicas=5` (or an HPA, or KEDA) writes.
    stories.patch_jobqueue(client, namespace, "ocr", {"spec": {"replicas": 5}})
    eventually(lambda: stories.replicas(client, namespace, "ocr") == 5, what="replicas 5 with an empty queue")
    stories.patch_jobqueue(client, namespace, "ocr", {"spec": {"replicas": 50}})
    eventually(lambda: stories.replicas(client, namespace, "ocr") == 8, what="replicas capped at max 8")
    body = eventually(
        lambda: (b := stories.jobqueue(client, namespace, "ocr")) and b["status"].get("replicas") == 8 and b,
        what="status.replicas 8 (the scale subresource's statusReplicasPath)",
    )
    assert stories.condition(body, "Scaling")["message"].startswith("following spec.replicas=")


def test_deleting_the_jobqueue_closes_its_database_pool(
    operator: OperatorThread, client: Kube, namespace: str, dsn: str
) -> None:
    clients = operator.options.clients
    assert clients is not None
    _ready_jobqueue(client, namespace, "ocr", dsn)
    assert clients.queues.open_count() >= 1
    client.request("DELETE", stories.jobqueues_path(namespace, "ocr"))
    eventually(lambda: clients.queues.open_count() == 0, what="the Queue closed after the delete")
