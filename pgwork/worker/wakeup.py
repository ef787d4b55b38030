"""The listener thread: LISTEN on a dedicated session connection and wake the claim loop.

Polling stays the fallback (delayed retries announce nothing, and a notification can be missed
while reconnecting), so a dead listener slows wake-ups down but never stops the worker.
"""

from __future__ import annotations

import contextlib
import logging
import threading

import psycopg

from pgwork.db import Listener, Queue
from pgwork.errors import PgworkError

log = logging.getLogger("pgwork.worker.wakeup")


class WakeListener(threading.Thread):
    def __init__(self, queue: Queue, wake: threading.Event, job_types: frozenset[str] | None) -> None:
        super().__init__(name="pgwork-listen", daemon=True)
        self._queue = queue
        self._wake = wake
        self._job_types = job_types
        self._stop_event = threading.Event()
        self._listener: Listener | None = None
        self.connected = threading.Event()
        self.notifications = 0

    def stop(self) -> None:
        self._stop_event.set()

    def run(self) -> None:
        retry_in = 0.5
        while not self._stop_event.is_set():
            try:
                if self._listener is None or self._listener.closed:
                    self._listener = self._queue.listener()
                    self.connected.set()
                    # Anything announced while we were not listening was missed: look once.
                    self._wake.set()
                types = self._listener.wait(timeout=0.5)
                retry_in = 0.5
                if types and (self._job_types is None or types & self._job_types):
                    self.notifications += 1
                    self._wake.set()
            except (psycopg.Error, PgworkError) as exc:
                self.connected.clear()
                self._close()
                log.warning(
                    "LISTEN connection failed (%s); polling meanwhile, reconnecting in %gs",
                    str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__,
                    retry_in,
                )
                self._stop_event.wait(retry_in)
                retry_in = min(retry_in * 2, 30.0)
            except Exception:
                log.exception("listener failed unexpectedly; polling meanwhile")
                self._close()
                self._stop_event.wait(retry_in)
                retry_in = min(retry_in * 2, 30.0)
        self._close()

    def _close(self) -> None:
        if self._listener is not None:
            with contextlib.suppress(psycopg.Error):
                self._listener.close()
            self._listener = None
