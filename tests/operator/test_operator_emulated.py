"""The real kopf operator against kmock's KubernetesEmulator and a real PostgreSQL.

The emulator has no controllers: these tests prove what the operator asks of the API (objects,
replicas, annotations, status, events), not what Kubernetes then does with it.
"""

from __future__ import annotations

import pytest

from pgwork.operator.kube import Kube
from tests.operator import stories
from tests.operator.harness import OperatorThread, eventually

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
    assert container["args"][container["args"].index("--job-types") + 1] == "ocr,extract"
    assert reaper["spec"]["concurrencyPolicy"] == "Forbid"
    reap_args = reaper["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["args"]
    assert reap_args == ["reap", "--loop-for", "50s", "--every", "10s"]
    assert service["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]

    body = eventually(
        lambda: (b := stories.jobqueue(client, namespace, "ocr"))
        and (stories.condition(b, "DatabaseReachable") or {}).get("status") == "True"
        and b,
        what="DatabaseReachable=True",
    )
    assert stories.condition(body, "Ready")["status"] == "True"
    assert body["status"]["pending"] == 0 and body["status"]["replicas"] == 1
    assert body["status"]["selector"] == "app.kubernetes.io/component=worker,pgwork.dev/jobqueue=ocr"
