from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from pgwork.operator.handlers import OperatorOptions
from pgwork.operator.kube import Kube, KubeError
from tests.support import stories
from tests.support.operator import Emulator, OperatorThread, eventually, record_calls, running


@pytest.fixture(scope="module")
def emulator() -> Iterator[Emulator]:
    emu = Emulator().start()
    yield emu
    record_calls(emu.operator_calls())
    emu.stop()


@pytest.fixture(scope="module")
def operator(emulator: Emulator) -> Iterator[OperatorThread]:
    options = OperatorOptions(clusterwide=True, standalone=True, metrics_port=None, tick_seconds=0.1)
    yield from running(emulator, options)


@pytest.fixture
def client(emulator: Emulator) -> Iterator[Kube]:
    c = emulator.client()
    yield c
    c.close()


@pytest.fixture
def namespace(emulator: Emulator) -> Iterator[str]:
    """A fresh namespace; its JobQueues are deleted afterwards so their timers stop."""
    name = f"t-{uuid.uuid4().hex[:8]}"
    yield name
    client = emulator.client()
    try:
        for item in client.request("GET", stories.jobqueues_path(name)).get("items") or []:
            try:
                client.request("DELETE", stories.jobqueues_path(name, item["metadata"]["name"]))
            except KubeError as exc:
                if exc.status != 404:  # already gone: the test deleted it and kopf let go
                    raise
        eventually(
            lambda: not client.request("GET", stories.jobqueues_path(name)).get("items"),
            what=f"JobQueues in {name} deleted (kopf removes its finalizer)",
        )
    finally:
        client.close()
