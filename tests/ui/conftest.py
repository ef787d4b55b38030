"""Fixtures of the console's tests: the app over a test database (Starlette's TestClient), and a
real server on a free port for the browser tests."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest

from pgwork.ui.command import missing_extra
from tests.core.conftest import make_role  # noqa: F401  (a fixture, shared)

if missing_extra():  # the ui extra absent: the modules that need it skip themselves
    collect_ignore = ["test_ui_http.py", "test_ui_browser.py", "test_ui_plan.py", "test_ui_pure.py"]
else:
    import uvicorn
    from starlette.testclient import TestClient

    from pgwork.ui.app import Settings, create_app
    from pgwork.ui.data import Console
    from pgwork.ui.security import AuthConfig

Client = Callable[..., "TestClient"]


@pytest.fixture
def client(dsn: str) -> Iterator[Client]:  # pragma: no cover - needs the ui extra
    """`client(dsn=..., **settings)`: a TestClient of the console on that database (the test's
    own by default), closed after the test."""
    opened: list[tuple[TestClient, Console]] = []

    def make(role_dsn: str | None = None, *, raise_errors: bool = True, **settings: object) -> TestClient:
        console = Console(role_dsn or dsn, pool_size=2)
        options: dict[str, object] = {"auth": AuthConfig(), "listen": False, "live": "poll"} | settings
        app = create_app(console, Settings(**options))  # type: ignore[arg-type]
        test_client = TestClient(app, raise_server_exceptions=raise_errors)
        test_client.__enter__()
        opened.append((test_client, console))
        return test_client

    yield make
    for test_client, console in opened:
        test_client.__exit__(None, None, None)
        console.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def serving(dsn: str, **settings: object) -> Iterator[str]:
    """The console served by uvicorn on a thread; yields its base URL."""
    console = Console(dsn, pool_size=3)
    options: dict[str, object] = {"auth": AuthConfig(), "interval": 0.5} | settings
    app = create_app(console, Settings(**options))  # type: ignore[arg-type]
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(
            app, host="127.0.0.1", port=port, log_level="warning", lifespan="on", timeout_graceful_shutdown=1
        )
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        started = threading.Event()
        for _ in range(200):
            if server.started:
                started.set()
                break
            threading.Event().wait(0.05)
        assert started.is_set(), "the console did not start"
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)
        console.close()
