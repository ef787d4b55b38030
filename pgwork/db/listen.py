"""Wake-ups: LISTEN on a dedicated session connection (never from the pool: behind a
transaction-mode pooler LISTEN would silently stop working)."""

from __future__ import annotations

import time

from pgwork.db import statements
from pgwork.db.connect import connect

NOTIFY_CHANNEL = "pgwork_jobs"


class Listener:
    """LISTEN on its own connection; `wait` returns the job types announced."""

    def __init__(self, dsn: str, application_name: str = "pgwork") -> None:
        self._conn = connect(dsn, application_name=f"{application_name}-listen")
        statements.execute(self._conn, "listen")

    def wait(self, timeout: float) -> set[str]:
        """Block up to `timeout` seconds for the first notification, then drain what else came."""
        types: set[str] = set()
        deadline = time.monotonic() + timeout
        for notify in self._conn.notifies(timeout=max(timeout, 0.0), stop_after=1):
            types.add(notify.payload)
        remaining = deadline - time.monotonic()
        if types and remaining > 0:
            for notify in self._conn.notifies(timeout=0.001):
                types.add(notify.payload)
        return types

    def close(self) -> None:
        self._conn.close()

    @property
    def closed(self) -> bool:
        return bool(self._conn.closed)
