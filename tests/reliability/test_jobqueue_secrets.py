"""Catalogue rows for a JobQueue whose Secret is missing or lacks its key: the real kopf operator
against kmock's emulator says so in the JobQueue's status, naming the field and the fix, and
changes nothing (no replicas decided on a backlog it cannot read, no password shown)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from pgwork.operator.handlers import OperatorOptions
from pgwork.operator.kube import Kube
from tests.operator import stories
from tests.operator.harness import Emulator, OperatorThread, eventually, running

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def emulator() -> Iterator[Emulator]:
    emu = Emulator().start()
    yield emu
    emu.stop()


@pytest.fixture(scope="module")
def operator(emulator: Emulator) -> Iterator[OperatorThread]:
    options = OperatorOptions(clusterwide=True, standalone=True, metrics_port=None, tick_seconds=0.1)
    for thread in running(emulator, options):
        # Start from a watching operator so each case exercises the create path; the resume path
        # (JobQueues that exist before the operator starts) has its own tests in
        # tests/operator/test_operator_restart.py.
        eventually(
            lambda: any(c["verb"] == "watch" and c["resource"] == "jobqueues" for c in emulator.operator_calls()),
            what="kopf watching jobqueues",
        )
        yield thread


@pytest.fixture
def client(emulator: Emulator) -> Iterator[Kube]:
    c = emulator.client()
    yield c
    c.close()


def _database_condition(client: Kube, namespace: str, name: str) -> dict[str, Any]:
    body = eventually(
        lambda: (
            (b := stories.jobqueue(client, namespace, name))
            and (stories.condition(b, "DatabaseReachable") or {}).get("status") == "False"
            and b
        ),
        timeout=20,
        what="DatabaseReachable=False",
    )
    condition = stories.condition(body, "DatabaseReachable")
    assert condition is not None
    return condition


@pytest.mark.parametrize(
    ("secret", "fragment"),
    [
        (None, "Secret {ns}/queue-db with key 'dsn' not found (spec.database)"),
        ({"url": "postgresql://app:s3cret-pw@db/app"}, "Secret {ns}/queue-db with key 'dsn' not found (spec.database)"),
    ],
    ids=["missing Secret", "Secret without the key"],
)
def test_jobqueue_secret_problems_are_reported_in_status(
    operator: OperatorThread, client: Kube, secret: dict[str, str] | None, fragment: str
) -> None:
    namespace = f"t-{uuid.uuid4().hex[:8]}"
    # kmock knows a namespace once something lives in it (it cannot create Namespace objects).
    stories.create_secret(client, namespace, "unrelated", "not used", key="x")
    if secret is not None:
        ((key, value),) = secret.items()
        stories.create_secret(client, namespace, "queue-db", value, key=key)
    stories.create_jobqueue(client, namespace, "ocr", stories.spec())
    try:
        condition = _database_condition(client, namespace, "ocr")
        assert condition["reason"] == "SecretMissing"
        assert fragment.format(ns=namespace) in condition["message"]
        assert "kubectl -n" in condition["message"] and "create secret generic queue-db" in condition["message"]
        assert "s3cret-pw" not in condition["message"]
        assert "SecretMissing" in stories.event_reasons(client, namespace, "ocr")
        # Nothing was scaled on a backlog the operator cannot read.
        assert stories.replicas(client, namespace, "ocr") == 1
    finally:
        client.request("DELETE", stories.jobqueues_path(namespace, "ocr"))
        eventually(
            lambda: not client.request("GET", stories.jobqueues_path(namespace)).get("items"),
            timeout=10,
            what="JobQueue deleted",
        )
