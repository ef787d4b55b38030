"""JobQueues that exist before the operator starts (every operator restart): the resume handler
applies their owned objects even though the scaling timer runs from the first moment."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from pgwork.operator.handlers import OperatorOptions
from pgwork.operator.kube import Kube
from tests.support import stories
from tests.support.operator import Emulator, eventually, record_calls, running

pytestmark = pytest.mark.slow


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


def _options() -> OperatorOptions:
    return OperatorOptions(clusterwide=True, standalone=True, metrics_port=None, tick_seconds=0.1)


def _owned_objects(client: Kube, ns: str) -> bool:
    return all(
        (
            stories.deployment(client, ns, "ocr"),
            client.get("CronJob", ns, "ocr-reaper"),
            client.get("CronJob", ns, "ocr-prune"),
            client.get("Service", ns, "ocr-metrics"),
        )
    )


def _settled(client: Kube, ns: str) -> dict[str, object] | None:
    body = stories.jobqueue(client, ns, "ocr")
    ready = stories.condition(body, "Ready") or {}
    scaling = stories.condition(body, "Scaling") or {}
    if ready.get("status") == "True" and scaling.get("status") == "True":
        return body
    return None


@pytest.mark.parametrize("with_secret", [True, False], ids=["with Secret", "Secret missing"])
def test_jobqueues_created_before_the_operator_get_their_objects(
    emulator: Emulator, client: Kube, dsn: str, with_secret: bool
) -> None:
    # Several at once and the fastest polling: kopf is busiest and the timers write most often.
    spaces = [f"team-{n}" for n in range(4)]
    for ns in spaces:
        if with_secret:
            stories.create_secret(client, ns, "queue-db", dsn)
        stories.create_jobqueue(client, ns, "ocr", stories.spec(scaling={"pollIntervalSeconds": 0.1}))
    for _ in running(emulator, _options()):
        for ns in spaces:
            eventually(lambda ns=ns: _owned_objects(client, ns), what=f"{ns}: Deployment, CronJobs, Service")
        if with_secret:
            for ns in spaces:
                body = eventually(lambda ns=ns: _settled(client, ns), what=f"{ns}: Ready and Scaling True")
                assert stories.condition(body, "DatabaseReachable")["status"] == "True"  # type: ignore[index]


def test_restarted_operator_resumes_and_keeps_status_quiet(emulator: Emulator, client: Kube, dsn: str) -> None:
    ns = "team-0"
    stories.create_secret(client, ns, "queue-db", dsn)
    stories.create_jobqueue(client, ns, "ocr", stories.spec())
    for _ in running(emulator, _options()):
        eventually(lambda ns=ns: _owned_objects(client, ns), what="the first run's objects")
        eventually(lambda: _settled(client, ns), what="the first run settled")
    # The owned objects are gone while no operator runs; the next one must bring them back.
    for path in (
        f"/apis/apps/v1/namespaces/{ns}/deployments/ocr-worker",
        f"/apis/batch/v1/namespaces/{ns}/cronjobs/ocr-reaper",
    ):
        client.request("DELETE", path)
    for _ in running(emulator, _options()):
        eventually(lambda ns=ns: _owned_objects(client, ns), what="the objects re-applied on resume")
        eventually(lambda: _settled(client, ns), what="the second run settled")
