"""The console served for real (uvicorn on a thread, a free port) for the browser tests."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import uvicorn

from pgwork.ui.app import Settings, create_app
from pgwork.ui.data import Console
from pgwork.ui.security import AuthConfig


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
