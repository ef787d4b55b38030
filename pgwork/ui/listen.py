"""Wake-ups for the live views: LISTEN on one dedicated session connection, shared by every
event stream. Only on a direct connection: behind a transaction-mode pooler LISTEN stops working
silently, so there the console runs with --no-listen and the streams poll every interval."""

from __future__ import annotations

import asyncio
import logging
import threading

from pgwork.db.listen import Listener

log = logging.getLogger("pgwork.ui")


class ChangeFeed:
    """Counts the notifications of new and finished jobs; `wait` returns at the next one (or
    after `timeout`). One thread owns the listening connection and reconnects after an error."""

    def __init__(self, dsn: str) -> None:
        self._dsn = dsn
        self._changed = threading.Condition()
        self._serial = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="pgwork-ui-listen", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        listener: Listener | None = None
        while not self._stop.is_set():
            try:
                if listener is None or listener.closed:
                    listener = Listener(self._dsn, "pgwork-ui")
                if listener.wait(1.0):
                    with self._changed:
                        self._serial += 1
                        self._changed.notify_all()
            except Exception as exc:  # the streams fall back to their interval meanwhile
                log.warning("console LISTEN failed (%s); retrying", type(exc).__name__)
                listener = None
                self._stop.wait(2.0)
        if listener is not None:
            listener.close()

    def _wait_sync(self, timeout: float) -> None:
        with self._changed:
            seen = self._serial
            self._changed.wait_for(lambda: self._serial != seen or self._stop.is_set(), timeout)

    async def wait(self, timeout: float) -> None:
        # At most one refresh per `timeout / 4`: a burst of notifications is one refresh.
        await asyncio.sleep(timeout / 4)
        await asyncio.to_thread(self._wait_sync, timeout)

    def close(self) -> None:
        self._stop.set()
        with self._changed:
            self._changed.notify_all()
