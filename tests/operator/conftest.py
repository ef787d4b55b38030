from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from pgwork.operator.handlers import OperatorOptions
from pgwork.operator.kube import Kube
from tests.operator.harness import Emulator, OperatorThread, record_calls, running


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
def namespace() -> str:
    return f"t-{uuid.uuid4().hex[:8]}"
