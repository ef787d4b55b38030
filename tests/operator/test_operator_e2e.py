"""The same story on a real cluster, when KUBECONFIG points at one (kind, k3d, minikube, ...).

The operator runs in-process (as in the emulator tests) with the kubeconfig's credentials; the
database is the test PostgreSQL, which only the operator needs to reach. Worker pods are created
by the real Deployment controller (their image need not start: the pods' names are what matter).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from importlib import resources

import pytest
import yaml

from pgwork.db import Queue
from pgwork.models import NewJob
from pgwork.operator.handlers import OperatorOptions
from pgwork.operator.kube import Kube, KubeError, default_configuration
from pgwork.operator.render import DELETION_COST
from tests.support import stories
from tests.support.operator import OperatorThread, eventually

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def _cluster() -> Kube:
    if not os.environ.get("KUBECONFIG"):
        pytest.skip("KUBECONFIG is not set: no real cluster to run the e2e story against")
    try:
        kube = Kube(default_configuration(), user_agent="pgwork-tests")
        kube.request("GET", "/version")
    except Exception as exc:
        pytest.skip(f"KUBECONFIG is set but the cluster does not answer: {exc}")
    return kube


@pytest.fixture(scope="module")
def cluster() -> Iterator[Kube]:
    kube = _cluster()
    for name in ("crd.yaml", "peering.yaml"):
        for document in yaml.safe_load_all(resources.files("pgwork.operator").joinpath(name).read_text()):
            try:
                kube.request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", body=document)
            except KubeError as exc:
                if exc.status != 409:
                    raise
    eventually(
        lambda: any(
            c.get("type") == "Established" and c.get("status") == "True"
            for c in kube.request("GET", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/jobqueues.pgwork.dev")
            .get("status", {})
            .get("conditions", [])
        ),
        timeout=60,
        what="the JobQueue CRD established",
    )
    yield kube
    kube.close()


@pytest.fixture
def namespace(cluster: Kube) -> Iterator[str]:
    name = f"pgwork-e2e-{uuid.uuid4().hex[:6]}"
    stories.create_namespace(cluster, name)
    yield name
    cluster.request("DELETE", f"/api/v1/namespaces/{name}")


@pytest.fixture
def operator(cluster: Kube, namespace: str) -> Iterator[OperatorThread]:
    options = OperatorOptions(namespaces=[namespace], standalone=True, metrics_port=None, tick_seconds=0.2)
    thread = OperatorThread(options).start()
    yield thread
    thread.stop()


def test_story_on_a_real_cluster(
    operator: OperatorThread, cluster: Kube, namespace: str, queue: Queue, dsn: str
) -> None:
    client = cluster
    stories.create_secret(client, namespace, "queue-db", dsn)
    created = stories.create_jobqueue(
        client,
        namespace,
        "ocr",
        stories.spec(scaling={"minReplicas": 1, "maxReplicas": 4, "scaleDownStabilizationSeconds": 3}),
        emulated=False,
    )
    uid = created["metadata"]["uid"]
    deployment = eventually(lambda: stories.deployment(client, namespace, "ocr"), timeout=60, what="Deployment")
    assert deployment["metadata"]["ownerReferences"][0]["uid"] == uid
    for kind, name in (("CronJob", "ocr-reaper"), ("CronJob", "ocr-prune"), ("Service", "ocr-metrics")):
        obj = eventually(lambda k=kind, n=name: client.get(k, namespace, n), what=name)
        assert obj["metadata"]["ownerReferences"][0]["uid"] == uid

    queue.enqueue_many([NewJob("ocr", {"n": i}) for i in range(50)])
    eventually(lambda: stories.replicas(client, namespace, "ocr") == 4, timeout=60, what="replicas 4 (max)")

    # Real pods from the real ReplicaSet: one of them holds two jobs.
    selector = "app.kubernetes.io/component=worker,pgwork.dev/jobqueue=ocr"
    pods = eventually(lambda: len(p := client.list_pods(namespace, selector)) == 4 and p, timeout=60, what="4 pods")
    busy = pods[0]["metadata"]["name"]
    queue.claim(busy, limit=2)
    for job in queue.claim("elsewhere", limit=1000):
        queue.succeed(job.lease, {})
    eventually(lambda: stories.replicas(client, namespace, "ocr") == 1, timeout=60, what="replicas back to 1")
    assert stories.pod_annotations(client, namespace, busy).get(DELETION_COST) == "200"

    stories.patch_jobqueue(client, namespace, "ocr", {"spec": {"worker": {"image": "registry.example/w:2"}}})
    eventually(
        lambda: (
            stories.deployment(client, namespace, "ocr")["spec"]["template"]["spec"]["containers"][0]["image"]
            == "registry.example/w:2"
        ),
        timeout=60,
        what="the new image",
    )


@pytest.mark.parametrize(
    ("override", "words"),
    [
        ({"scaling": {"minReplicas": 5, "maxReplicas": 2}}, "minReplicas must be at most"),
        ({"lease": {"durationSeconds": 20, "heartbeatSeconds": 10}}, "at most a third"),
        ({"reaper": {"schedule": "* * *"}}, "reaper.schedule"),
    ],
)
def test_the_api_server_rejects_invalid_specs(
    cluster: Kube, namespace: str, override: dict[str, object], words: str
) -> None:
    with pytest.raises(KubeError) as info:
        stories.create_jobqueue(cluster, namespace, "bad", stories.spec(**override), emulated=False)
    assert info.value.status == 422
    assert words in str(info.value)
