"""How the operator runs: one namespace with its liveness and metrics endpoints; two replicas with
kopf peering, of which exactly one acts until it goes away; and what its metrics say of jobs
waiting for parents."""

from __future__ import annotations

import socket
import urllib.request
from collections.abc import Iterator

import pytest

from pgwork.db import Queue
from pgwork.models import NewJob
from pgwork.operator.handlers import OperatorOptions
from pgwork.operator.kube import Kube
from tests.support import stories
from tests.support.operator import Emulator, eventually, record_calls, running
from tests.support.scrape import get, samples
from tests.support.waiting import stays

pytestmark = pytest.mark.slow


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def fetch(url: str) -> tuple[int, str]:
    with urllib.request.urlopen(url, timeout=5) as response:
        return response.status, response.read().decode()


@pytest.fixture
def emulator() -> Iterator[Emulator]:
    emu = Emulator().start()
    yield emu
    record_calls(emu.operator_calls())
    emu.stop()


@pytest.fixture
def client(emulator: Emulator) -> Iterator[Kube]:
    c = emulator.client()
    yield c
    c.close()


def test_one_namespace_with_liveness_and_metrics(emulator: Emulator, client: Kube, dsn: str) -> None:
    metrics_port, liveness_port = free_port(), free_port()
    options = OperatorOptions(namespaces=["team-a"], standalone=True, metrics_port=metrics_port, tick_seconds=0.1)
    liveness = f"http://127.0.0.1:{liveness_port}/healthz"
    for ns in ("team-a", "team-b"):
        stories.create_secret(client, ns, "queue-db", dsn)
        stories.create_jobqueue(client, ns, "ocr", stories.spec())
    for _ in running(emulator, options, liveness_endpoint=liveness):
        eventually(lambda: stories.deployment(client, "team-a", "ocr"), what="team-a's Deployment")
        eventually(
            lambda: (
                'pgwork_queue_database_up{jobqueue="ocr",namespace="team-a"} 1.0'
                in fetch(f"http://127.0.0.1:{metrics_port}/metrics")[1]
            ),
            what="the team-a gauges",
        )
        status, text = fetch(f"http://127.0.0.1:{metrics_port}/metrics")
        assert status == 200
        for name in (
            "pgwork_queue_ready_jobs", "pgwork_queue_scheduled_jobs", "pgwork_queue_running_jobs",
            "pgwork_queue_dead_jobs", "pgwork_queue_waiting_jobs", "pgwork_queue_oldest_wait_seconds",
            "pgwork_queue_max_heartbeat_age_seconds",
            "pgwork_queue_desired_replicas", "pgwork_queue_current_replicas",
            "pgwork_queue_heartbeat_interval_seconds", "pgwork_queue_database_up",
        ):  # fmt: skip
            assert f'{name}{{jobqueue="ocr",namespace="team-a"}}' in text, name
        assert 'pgwork_queue_count_lower_bound{figure="ready",jobqueue="ocr",namespace="team-a"} 0.0' in text
        assert 'namespace="team-b"' not in text
        assert fetch(liveness)[0] == 200
        assert stories.deployment(client, "team-b", "ocr") is None  # not watched
    # The namespaced operator never listed anything cluster-wide.
    assert not [
        c for c in emulator.operator_calls() if c["verb"] in ("list", "watch") and c["resource"] == "namespaces"
    ]


def test_two_replicas_with_peering_one_acts(emulator: Emulator, client: Kube, dsn: str) -> None:
    ns = "team-p"
    client.request(
        "POST",
        f"/apis/kopf.dev/v1/namespaces/{ns}/kopfpeerings",
        body={"apiVersion": "kopf.dev/v1", "kind": "KopfPeering", "metadata": {"name": "pgwork", "namespace": ns}},
    )
    stories.create_secret(client, ns, "queue-db", dsn)

    def options(identity: str, priority: int) -> OperatorOptions:
        return OperatorOptions(
            namespaces=[ns], metrics_port=None, tick_seconds=0.1, priority=priority, identity=identity
        )

    def agents() -> set[str]:
        return {c["agent"] for c in emulator.operator_calls() if c["agent"].startswith("pgwork-operator")}

    follower = running(emulator, options("replica-low", 10))
    next(follower)
    leader = running(emulator, options("replica-high", 20))
    next(leader)
    peering = eventually(
        lambda: (
            len(client.request("GET", f"/apis/kopf.dev/v1/namespaces/{ns}/kopfpeerings/pgwork").get("status") or {})
            == 2
        ),
        what="both replicas in the peering object",
    )
    assert peering
    stories.create_jobqueue(client, ns, "ocr", stories.spec())
    # Which replica acts is settled through the peering object (the lower one pauses when it sees
    # the higher): usually within a second or two, but seen to take longer on a loaded machine.
    eventually(lambda: stories.deployment(client, ns, "ocr"), what="the Deployment")
    eventually(lambda: stories.replicas(client, ns, "ocr") == 1 and stories.jobqueue(client, ns, "ocr").get("status"))
    assert agents() == {"pgwork-operator/0.1.0 (replica-high)"}

    # The active replica goes; the other takes over and acts on the next change.
    with pytest.raises(StopIteration):
        next(leader)
    stories.patch_jobqueue(client, ns, "ocr", {"spec": {"worker": {"image": "registry.example/w:3"}}})
    eventually(
        lambda: (
            stories.deployment(client, ns, "ocr")["spec"]["template"]["spec"]["containers"][0]["image"]
            == "registry.example/w:3"
        ),
        what="the follower applying the change",
    )
    assert "pgwork-operator/0.1.0 (replica-low)" in agents()
    with pytest.raises(StopIteration):
        next(follower)


def test_waiting_jobs_are_shown_but_never_scaled_on(emulator: Emulator, client: Kube, queue: Queue, dsn: str) -> None:
    """Jobs waiting for parents (issue 27): status.waiting and pgwork_queue_waiting_jobs show them,
    scaling never counts them (no worker can take them) until their parent succeeds."""
    port = free_port()
    ns, name = "team-w", "ocr"
    options = OperatorOptions(clusterwide=True, standalone=True, metrics_port=port, tick_seconds=0.1)
    gauge = ("pgwork_queue_waiting_jobs", (("jobqueue", name), ("namespace", ns)))
    lower = ("pgwork_queue_count_lower_bound", (("figure", "waiting"), ("jobqueue", name), ("namespace", ns)))
    # cap = maxReplicas 8 x target 5 + 1 = 41 per type: 45 waiting ocr jobs read as "at least 41",
    # 3 waiting extract jobs exactly; a waiting job of another queue's type is not ours.
    stories.create_secret(client, ns, "queue-db", dsn)
    parent = queue.enqueue("not-ours", {})
    queue.enqueue_many(
        [NewJob("ocr", {"n": i}, after=[parent]) for i in range(45)]
        + [NewJob("extract", {"n": i}, after=[parent]) for i in range(3)]
        + [NewJob("not-ours", {"n": i}, after=[parent]) for i in range(7)]
    )
    for _ in running(emulator, options):
        stories.create_jobqueue(client, ns, name, stories.spec())
        body = eventually(
            lambda: (b := stories.jobqueue(client, ns, name)) and "waiting" in (b.get("status") or {}) and b,
            what="status.waiting",
        )
        status = body["status"]
        assert (status["waiting"], status["pending"], status["countCap"]) == (41 + 3, 0, 41)
        assert status["lowerBounds"] == ["waiting"]
        assert status["desiredReplicas"] == 1  # minReplicas: 44+ waiting jobs ask for nothing
        scraped = samples(get(f"http://127.0.0.1:{port}/metrics")[1])
        assert (scraped[gauge], scraped[lower]) == (44.0, 1.0)
        stays(lambda: stories.replicas(client, ns, name) == 1, duration=1.0, what="replicas 1 while jobs wait")

        # The parent succeeds: the children become pending, the same jobs now ask for workers.
        for job in queue.claim("w-1", job_types=["not-ours"], limit=1):
            queue.succeed(job.lease, {"ok": True})
        eventually(lambda: stories.replicas(client, ns, name) == 8, what="replicas 8 once the children are ready")
        eventually(
            lambda: samples(get(f"http://127.0.0.1:{port}/metrics")[1]).get(gauge) == 0.0,
            what="the waiting gauge back to 0",
        )
        after = stories.jobqueue(client, ns, name)["status"]
        assert (after["waiting"], after["pending"], after["lowerBounds"]) == (0, 41 + 3, ["pending"])
