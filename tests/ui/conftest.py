"""Fixtures of the console's tests: the app over a test database (Starlette's TestClient), and a
real server on a free port for the browser tests."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Iterator

import pytest

from tests.support.db import MakeRole, role_maker

if any(
    importlib.util.find_spec(m) is None for m in ("starlette", "jinja2", "uvicorn")
):  # the ui extra absent: the modules that need it skip themselves
    collect_ignore = ["test_ui_http.py", "test_ui_browser.py", "test_ui_plan.py", "test_ui_pure.py"]
else:
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


@pytest.fixture
def make_role(dsn: str) -> Iterator[MakeRole]:
    yield from role_maker(dsn)
