"""Fixtures for worker tests."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.workers import Kind, Spawn, WorkerProcess, start_worker


@pytest.fixture(params=["sync", "async"])
def kind(request: pytest.FixtureRequest) -> Kind:
    """The same story for a plain handler and its `async def` twin in pgwork_test_app."""
    return Kind(request.param)


@pytest.fixture
def spawn_worker(dsn: str, tmp_path: Path) -> Iterator[Spawn]:
    started: list[WorkerProcess] = []

    def spawn(*args: str, worker_id: str | None = None, env: dict[str, str] | None = None) -> WorkerProcess:
        return start_worker(dsn, tmp_path, started, *args, worker_id=worker_id, env=env)

    yield spawn
    for wp in started:
        if wp.alive():
            wp.proc.send_signal(signal.SIGKILL)
            wp.proc.wait(timeout=10)
